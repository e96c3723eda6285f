"""Load the sibling helper modules of these tests (every ``*.py`` here that is not a test or
this file: ``lowering_cases``, ``slc_examples`` ...) once under their own names (the tests
folder is not a package; pytest imports this conftest before the test modules beside it)."""

import importlib.util
import sys
from pathlib import Path

for _path in sorted(Path(__file__).parent.glob("*.py")):
    _name = _path.stem
    if _name.startswith("test_") or _name == "conftest" or _name in sys.modules:
        continue
    _spec = importlib.util.spec_from_file_location(_name, _path)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _mod
    _spec.loader.exec_module(_mod)
