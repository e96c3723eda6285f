"""The SLC reference interpreter on lowered clusters: results against a numpy reference,
the counters later levels build on (stream elements, bytes, callbacks, iterations), zero-size
shapes, and errors for accesses a correct program never makes."""

import numpy as np
import pytest
import slc_specs

from ember_xla.dae_target.interp.run import run, run_counted
from ember_xla.dae_target.lower.to_slc import lower_to_slc
from ember_xla.ir.interpreter import InterpretError


def _bag_inputs():
    table = np.arange(40, dtype=np.float32).reshape(10, 4) / 8
    idx = np.array([3, 0, 9, 3, 12, -1], np.int32)  # 12, -1 clip to 9, 0
    off = np.array([0, 2, 6], np.int32)
    return table, idx, off


def test_sum_bag_values_and_counters():
    table, idx, off = _bag_inputs()
    (out,), c = run_counted(lower_to_slc(slc_specs.offsets_bag()), [table, idx, off])
    clipped = np.clip(idx, 0, 9)
    want = np.stack([table[clipped[0:2]].sum(0), table[clipped[2:6]].sum(0)])
    assert np.array_equal(out, want)
    b, lk, d = 2, 6, 4
    assert c["slc.elements"] == 2 * b + lk + lk * d        # offsets, indices, row elements
    assert c["slc.bytes"] == 4 * (2 * b + lk + lk * d)
    assert c["slc.callbacks"] == b + lk * d                # begin of bag + one per element
    assert c["slc.iterations"] == b + lk + lk * d
    assert c["slc.alu"] == b * 3 + lk                      # b+1, two casts; clamp per lookup


def test_mean_fill_wrap_weighted():
    table, idx, off = _bag_inputs()
    w = np.array([1, 2, 0.5, -1, 3, 1], np.float32)
    spec = slc_specs.offsets_bag(combiner="mean", mode="fill", wrap=True, weighted=True)
    (out,) = run(lower_to_slc(spec), [table, idx, off, w])
    wrapped = np.where(idx < 0, idx + 10, idx)
    rows = np.where((wrapped < 10)[:, None], table[np.minimum(wrapped, 9)], np.nan) * w[:, None]
    assert np.array_equal(out[0], rows[0:2].sum(0) * np.float32(1 / 2))
    assert np.isnan(out[1]).all()  # id 12 is out of range: a NaN row


def test_empty_bags_get_init():
    table, idx, _ = _bag_inputs()
    off = np.array([2, 2, 2], np.int32)
    (out,) = run(lower_to_slc(slc_specs.offsets_bag(combiner="mean", init=-3.0)),
                 [table, idx, off])
    assert (out == -3.0).all()


def test_zero_bags_and_zero_width():
    table, idx, _ = _bag_inputs()
    (out,), c = run_counted(lower_to_slc(slc_specs.offsets_bag(bags=0)),
                            [table, idx, np.array([0], np.int32)])
    assert out.shape == (0, 4) and c.get("slc.callbacks", 0) == 0
    (out,) = run(lower_to_slc(slc_specs.offsets_bag(d=0)),
                 [np.zeros((10, 0), np.float32), idx, np.array([0, 2, 6], np.int32)])
    assert out.shape == (2, 0)


def test_segment_drop_and_counts():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([1, 2, 3, 4, 5, 6], np.int64)
    seg = np.array([0, 0, 2, 5, -1, 2], np.int32)  # 5 and -1 dropped, segment 1 empty
    (out,) = run(lower_to_slc(slc_specs.segment_reduce(combiner="mean")), [table, idx, seg])
    assert np.array_equal(out[0], (table[1] + table[2]) * np.float32(0.5))
    assert (out[1] == 0).all()
    assert np.array_equal(out[2], (table[3] + table[6]) * np.float32(0.5))


def test_bad_offsets_are_an_error_not_a_wraparound():
    table, idx, _ = _bag_inputs()
    with pytest.raises(InterpretError, match="out of bounds"):
        run(lower_to_slc(slc_specs.offsets_bag()), [table, idx, np.array([0, 2, 9], np.int32)])


def test_inputs_must_have_the_function_types():
    table, idx, off = _bag_inputs()
    with pytest.raises(InterpretError, match="input 1"):
        run(lower_to_slc(slc_specs.offsets_bag()), [table, idx.astype(np.int64), off])
