"""``ember.padded_bag`` with ``row_type="bf16"`` reads an f32 table as the bf16 table
``convert(table, bf16)``: in every order, for every combiner it takes, with an f32 or a bf16
result, it gives the bits the call gives for the converted table itself (whose exactness the
other kernel tests check). What it does not take is one clear error."""

from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np
import pytest

from ember_xla.native import register_targets

BF16 = ml_dtypes.bfloat16


def _call(table, ids, *, combiner="sum", order="sequential", row_type="", out=np.float32,
          weights=None, init=None):
    register_targets()
    init = {"max": -np.inf, "min": np.inf}.get(combiner, 0.0) if init is None else init
    call = jax.ffi.ffi_call("ember.padded_bag",
                            jax.ShapeDtypeStruct((ids.shape[0], table.shape[1]), out))
    extra = [] if weights is None else [weights]
    return np.asarray(call(table, ids, *extra, combiner=combiner, index_mode="fill",
                           wrap_negative=True, weighted=weights is not None, init=float(init),
                           index_bits=np.int64(64), sum_order=order, row_type=row_type))


def _table(rng, n, d, p):
    """Normal values of many scales; ties (1 + 2^-8 rounds to even), denormals, -0.0, and in
    about one bag sum of five a NaN with low payload bits, +-inf or the largest f32 (rounds to
    inf)."""
    t = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-6, 6, (n, d)))).astype(np.float32)
    u = rng.random((n, d))
    t[u < 0.2] = rng.choice(np.array([1 + 2**-8, -(1 + 3 * 2**-8), 1e-39, -0.0], np.float32),
                            int((u < 0.2).sum()))
    poison = np.concatenate([np.array([np.inf, -np.inf, 3.4028235e38], np.float32),
                             np.array([0x7f800001, 0xffbfffff], np.uint32).view(np.float32)])
    bad = u > 1 - 0.2 / p
    t[bad] = rng.choice(poison, int(bad.sum()))
    return t


def _same(a, b) -> bool:
    """Equal bits; NaN positions (not payloads) for NaNs."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    na, nb = np.isnan(a32), np.isnan(b32)
    return a.dtype == b.dtype and np.array_equal(na, nb) and np.array_equal(
        np.where(na, 0, a32).view(np.uint32), np.where(nb, 0, b32).view(np.uint32))


CASES = [  # (order, combiner, result type, (B, P, D))
    ("sequential", "sum", np.float32, (7, 9, 5)),
    ("sequential", "sum", BF16, (7, 9, 5)),
    ("sequential", "mean", np.float32, (5, 30, 8)),
    ("sequential", "sqrt_n", BF16, (5, 30, 8)),
    ("sequential", "max", np.float32, (6, 11, 3)),
    ("sequential", "min", BF16, (6, 11, 3)),
    ("blocked", "sum", np.float32, (64, 40, 64)),   # D % 64, bags of > 16 rows
    ("blocked", "sum", np.float32, (64, 12, 128)),  # D % 64, bags of <= 16 rows
    ("blocked", "mean", np.float32, (33, 70, 32)),
    ("blocked", "sum", np.float32, (9, 300, 16)),
    ("blocked", "sum", np.float32, (9, 20, 8)),
    ("blocked", "sum", np.float32, (9, 20, 12)),    # no AVX2 path: the scalar loop
    ("tree32", "sum", np.float32, (4, 100, 8)),
    ("tree32", "mean", np.float32, (4, 45, 3)),
    ("vector8", "sum", np.float32, (8, 29, 16)),
]


@pytest.mark.parametrize("order, combiner, out, shape", CASES)
def test_rows_read_as_bf16_are_the_converted_tables(order, combiner, out, shape):
    b, p, d = shape
    rng = np.random.default_rng([b, p, d])
    table = _table(rng, 200, d, p)
    ids = rng.integers(0, 200, (b, p)).astype(np.int32)
    oob = rng.random((b, p)) < 0.3 / p  # in about one bag of three: a NaN row
    ids[oob] = rng.choice(np.array([-201, 200, 250], np.int32), int(oob.sum()))
    got = _call(table, ids, combiner=combiner, order=order, row_type="bf16", out=out)
    with np.errstate(invalid="ignore"):  # (numpy warns converting the NaNs)
        want = _call(table.astype(BF16), ids, combiner=combiner, order=order, out=out)
    assert _same(got, want)
    # and the rounding decides: the f32 table's own sum differs
    if combiner in ("sum", "mean") and out == np.float32:
        assert not _same(_call(table, ids, combiner=combiner, order=order, out=out), want)


@pytest.mark.parametrize("kw, message", [
    (dict(row_type="f16"), "row_type must be"),
    (dict(table_type=BF16), "row_type=bf16 reads an f32 table"),
    (dict(order="reduce_loop", combiner="max"), "row_type=bf16 is for unweighted bags"),
    (dict(weighted=True), "row_type=bf16 is for unweighted bags"),
    (dict(out=np.float16), "must be the rows' type (bf16) or f32"),
])
def test_what_it_does_not_take_is_one_clear_error(kw, message):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((20, 8)).astype(kw.pop("table_type", np.float32))
    ids = rng.integers(0, 20, (4, 3)).astype(np.int32)
    weights = np.ones((4, 3), np.float32) if kw.pop("weighted", False) else None
    kw.setdefault("row_type", "bf16")
    with pytest.raises(Exception, match=re.escape(message)):
        _call(table, ids, weights=weights, **kw)
