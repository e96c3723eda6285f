"""Loading the tests' helper modules by path. The test folders are not packages (pytest runs
with ``--import-mode=importlib``), so a helper (``corpus.py``, ``lowering_cases.py``...) is
loaded once, under its name, and shared through ``sys.modules`` by every test that asks for
it. tests/conftest.py puts this folder on ``sys.path``: ``from helper_modules import
load_helper``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent


def load_helper(path: Path | str, name: str | None = None) -> ModuleType:
    """The module at ``path`` (a relative path is below tests/) as ``sys.modules[name]``
    (default: its file name), loaded the first time it is asked for."""
    path = TESTS / path
    name = name or path.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no Python module at {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
