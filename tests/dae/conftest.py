"""The format's tests build their programs with the compiler's case helpers
(``tests/dae_target``: ``pass_cases``, ``lowering_cases`` ...): load them the way that folder's
conftest does."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "dae_target_helpers", Path(__file__).parents[1] / "dae_target" / "conftest.py")
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))
