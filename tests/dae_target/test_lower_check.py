"""The check itself can fail: wrong programs (a changed combine op, a missing init, a missing
clamp) are reported with a reason, and shrink keeps a too-large cluster checkable."""

import pytest
import slc_specs

from ember_xla.dae_target.check import check_spec, compare, shrink
from ember_xla.dae_target.lower.to_slc import lower_to_slc
from ember_xla.ir.interpreter import InterpretError
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module


def _mutated(spec, old, new, count=1):
    text = print_module(lower_to_slc(spec))
    assert old in text
    return parse_module(text.replace(old, new, count))


def test_a_changed_combine_op_is_caught():
    spec = slc_specs.offsets_bag(n=6, d=2, lookups=8, bags=3)
    res = check_spec(spec, _mutated(spec, '"arith.addf"', '"arith.maxf"'), rounds=1)
    assert not res.ok and "not bit-exact" in res.failures[0]


def test_a_missing_init_is_caught_by_the_poisoned_output():
    spec = slc_specs.offsets_bag(n=6, d=2, lookups=8, bags=3)
    line = ('"memref.store"(%10, %out, %9, %i) : (f32, memref<?x?xf32>, index, index) -> ()\n'
            '          ')
    res = check_spec(spec, _mutated(spec, line, ""), rounds=1)
    assert not res.ok and "NaN" in res.failures[0]
    good = check_spec(spec, lower_to_slc(spec), rounds=1)
    assert good.ok and good.bitwise


def test_a_missing_clamp_is_an_out_of_bounds_access():
    spec = slc_specs.offsets_bag(n=6, d=2, lookups=8, bags=3)
    text = print_module(lower_to_slc(spec))
    old = ('"slc.mem_stream"(%table, %14, %k) : (memref<?x?xf32>, !slc.stream<index>, '
           '!slc.stream<index>)')
    new = ('"slc.mem_stream"(%table, %13, %k) : (memref<?x?xf32>, !slc.stream<i32>, '
           '!slc.stream<index>)')
    assert old in text
    with pytest.raises(InterpretError, match="out of bounds"):
        check_spec(spec, parse_module(text.replace(old, new)), rounds=1)


def test_compare_nan_positions_and_tolerance():
    import numpy as np

    a = np.array([1.0, np.nan], np.float32)
    assert compare(a, a.copy(), True)[1] is None
    assert "NaN" in compare(a, np.array([1.0, 2.0], np.float32), True)[1]
    b = np.array([1.0 + 2**-23, np.nan], np.float32)
    assert compare(a, b, True)[1] is not None and compare(a, b, False)[1] is None


def test_shrunk_large_cluster_checks_quickly():
    big = slc_specs.offsets_bag(n=100_000, d=128, lookups=500_000, bags=2048)
    small = shrink(big)
    assert small.parts[0].table.shape == (16, 8) and small.outputs[0].shape == (4, 8)
    res = check_spec(small, lower_to_slc(small), rounds=1)
    assert res.ok and res.bitwise
