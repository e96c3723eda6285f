"""Load the sibling idiom zoo once, as ``idiom_models`` (the tests folder is not a package;
pytest imports this conftest before the test modules beside it)."""

import importlib.util
import sys
from pathlib import Path

if "idiom_models" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "idiom_models", Path(__file__).with_name("idiom_models.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["idiom_models"] = _mod
    _spec.loader.exec_module(_mod)
