"""Shared placement fixtures (the NPU machine); loads the sibling helper module
``placement_cases`` under its own name (the tests folder is not a package)."""

import pytest
from helper_modules import load_helper

from ember_xla.placement.api import machine

load_helper("placement/placement_cases.py")


@pytest.fixture(scope="session")
def npu():
    return machine("npu")
