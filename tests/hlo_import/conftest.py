"""Load the sibling corpus module once, as ``tests_hlo_import_corpus`` (the tests folder is not a
package; pytest imports this conftest before the test modules beside it)."""

import importlib.util
import sys
from pathlib import Path


def load_sibling(filename: str, name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


load_sibling("corpus.py", "tests_hlo_import_corpus")
