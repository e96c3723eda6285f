"""``util.strict_json``: non-finite numbers as "inf"/"-inf"/"nan" strings, NumPy values as
Python ones, and nothing a strict JSON reader rejects."""

import json
import math

import numpy as np
import pytest

from ember_xla.util import strict_json


def strict_loads(text):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_become_strings():
    doc = {"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": {"d": np.float32("inf")},
           "e": np.array([np.nan, 2.0]), "f": np.int64(3), "g": np.bool_(True), "h": (1, 2)}
    got = strict_loads(strict_json.dumps(doc))
    assert got == {"a": "inf", "b": ["-inf", "nan", 1.5], "c": {"d": "inf"},
                   "e": ["nan", 2.0], "f": 3, "g": True, "h": [1, 2]}


def test_number_reads_them_back():
    assert strict_json.number("inf") == math.inf and strict_json.number("-inf") == -math.inf
    assert math.isnan(strict_json.number("nan"))
    assert strict_json.number("bitwise") == "bitwise" and strict_json.number(2.5) == 2.5


def test_unknown_objects_still_refused():
    with pytest.raises(TypeError):
        strict_json.dumps({"x": object()})
