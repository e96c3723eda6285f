"""Shared placement fixtures (the NPU machine); loads the sibling helper module
``placement_cases`` under its own name (the tests folder is not a package)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from ember_xla.placement.api import machine

if "placement_cases" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "placement_cases", Path(__file__).with_name("placement_cases.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["placement_cases"] = _mod
    _spec.loader.exec_module(_mod)


@pytest.fixture(scope="session")
def npu():
    return machine("npu")
