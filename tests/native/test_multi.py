# ruff: noqa: E501  (the HLO text example is kept verbatim, as in docs/CUSTOM_CALL.md)
"""ember.multi_segment_reduce: one lookup, several combiners in one call (one plan, the rows
read once per block of output rows); every result bit-identical to ember.segment_reduce with
that combiner and init, and to plain JAX (gather + jax.ops.segment_*), on random and edge
inputs (out-of-range, negative and duplicate ids, dropped segment ids, empty segments)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_kernels import (  # noqa: E402  (the shared helpers of the kernel tests)
    DEFAULT_INIT,
    DTYPES,
    assert_same_bits,
    attrs,
    ember,
    make_table,
    reference,
    run_hlo_text,
    ulps,
)

native = pytest.importorskip("ember_xla.native")

# (N, D, L, S): small; sorted segment ids fold the plan; a large one (threads, several
# blocks of output rows per part); a wide row; no lookups; a one-row table
SPECS = [(13, 5, 60, 7), (3000, 64, 40000, 900), (40, 136, 500, 31), (7, 8, 0, 3), (1, 4, 9, 2)]
SETS = [("sum", "max"), ("sum", "max", "min"), ("max", "min"), ("mean", "sqrt_n", "sum")]


def multi(table, idx, seg, rows, combiners, inits=None, mode="clip", wrap=True, index_bits=64,
          out_dtype=None, weights=None):
    inits = [DEFAULT_INIT[c] for c in combiners] if inits is None else inits
    dt = table.dtype if out_dtype is None else out_dtype
    shapes = [jax.ShapeDtypeStruct((rows, table.shape[1]), dt) for _ in combiners]
    call = jax.ffi.ffi_call("ember.multi_segment_reduce", shapes)
    extra = () if weights is None else (weights,)
    return call(table, idx, seg, *extra, combiners=",".join(combiners),
                inits=",".join(repr(float(x)) for x in inits), index_mode=mode,
                wrap_negative=wrap, weighted=weights is not None, index_bits=index_bits)


def _data(rng, spec, dtype, sorted_ids, itype):
    n, d, length, s = spec
    table = make_table(rng, n, d, dtype)
    with jax.enable_x64(True):
        idx = jnp.asarray(rng.integers(-2 * n, 2 * n, length), itype)  # OOB, negative, dups
        ids = np.sort(rng.integers(0, s, length)) if sorted_ids else rng.integers(-2, s + 2,
                                                                                   length)
        if not sorted_ids and length:
            ids[ids == 1] = 0  # segment 1 empty
        seg = jnp.asarray(ids, itype)
    return table, idx, seg, s


@pytest.mark.parametrize("sorted_ids", [False, True], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_multi_matches_single_calls_and_jax(dtype, sorted_ids):
    rng = np.random.default_rng(hash((jnp.dtype(dtype).name, sorted_ids)) % 2**32)
    for k, spec in enumerate(SPECS):
        itype = jnp.int64 if k % 2 else jnp.int32
        table, idx, seg, s = _data(rng, spec, dtype, sorted_ids, itype)
        combiners = SETS[k % len(SETS)]
        for mode, wrap in (("clip", False), ("fill", True)):
            with jax.enable_x64(True):
                outs = multi(table, idx, seg, s, combiners, mode=mode, wrap=wrap)
                assert len(outs) == len(combiners)
                for c, got in zip(combiners, outs, strict=True):
                    a = attrs(c, mode, wrap, False)
                    assert_same_bits(got, ember("segment_reduce", s, table, idx, seg, **a))
                    want = reference(table, idx, seg, s, None, c, mode, wrap)
                    assert_same_bits(got, want, ulps(c))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda t: jnp.dtype(t).name)
def test_f32_results_custom_inits_and_index_bits(dtype):
    rng = np.random.default_rng(7)
    table, idx, seg, s = _data(rng, (50, 16, 700, 40), dtype, False, jnp.int64)
    combiners, inits = ("sum", "max", "min"), (1.5, -3.4028234663852886e38, math.inf)
    with jax.enable_x64(True):
        big = jnp.asarray(np.asarray(idx, np.int64) + (1 << 32), jnp.int64)  # truncated to idx
        outs = multi(table, big, seg, s, combiners, inits, "fill", True, 32, jnp.float32)
        for c, init, got in zip(combiners, inits, outs, strict=True):
            assert got.dtype == jnp.float32
            want = reference(table, big, seg, s, None, c, "fill", True, init=init, index_bits=32,
                             out_dtype=jnp.float32)
            assert_same_bits(got, want)


@pytest.mark.parametrize("sorted_ids", [False, True], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_weighted_multi_matches_single_weighted_calls(dtype, sorted_ids):
    rng = np.random.default_rng(11 + sorted_ids)
    table, idx, seg, s = _data(rng, (300, 24, 5000, 120), dtype, sorted_ids, jnp.int32)
    w = rng.standard_normal(5000)
    w[::17] = 0.0
    combiners = ("sum", "max", "min", "mean")
    for wt, out in ((dtype, dtype), (jnp.float32, jnp.float32), (dtype, jnp.float32)):
        if dtype == jnp.float32 and (wt, out) != (dtype, dtype):
            continue
        weights = jnp.asarray(w, wt)
        outs = multi(table, idx, seg, s, combiners, mode="fill", out_dtype=out, weights=weights)
        for c, got in zip(combiners, outs, strict=True):
            single = ember("segment_reduce", s, table, idx, seg, weights, out_dtype=out,
                           **attrs(c, "fill", True, True))
            assert_same_bits(got, single)
            want = reference(table, idx, seg, s, weights, c, "fill", True, out_dtype=out)
            assert_same_bits(got, want, ulps(c))


def test_large_call_same_bits_as_separate_calls():
    # 0.3M lookups of D=64 rows: parallel parts, each several L2 blocks of output rows
    rng = np.random.default_rng(3)
    n, d, length, s = 20000, 64, 300000, 5000
    table = make_table(rng, n, d, jnp.float32)
    idx = jnp.asarray(rng.integers(0, n, length), jnp.int32)
    seg = jnp.asarray(rng.integers(0, s, length), jnp.int32)
    outs = multi(table, idx, seg, s, ("sum", "max", "min"))
    for c, got in zip(("sum", "max", "min"), outs, strict=True):
        assert_same_bits(got, ember("segment_reduce", s, table, idx, seg,
                                    **attrs(c, "clip", True, False)))


def _raises(fn, match: str) -> None:
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn())


def test_invalid_attributes_and_operands_raise_not_crash():
    table = make_table(np.random.default_rng(0), 6, 4, jnp.float32)
    i4 = jnp.arange(4, dtype=jnp.int32)
    _raises(lambda: multi(table, i4, i4, 3, ("sum", "max"), inits=(0.0,)), "as many combiners")
    _raises(lambda: multi(table, i4, i4, 3, ("sum", "avg"), inits=(0.0, 0.0)),
            "combiner must be one of")
    call = jax.ffi.ffi_call("ember.multi_segment_reduce",
                            [jax.ShapeDtypeStruct((3, 4), jnp.float32)] * 2)
    base = dict(index_mode="clip", wrap_negative=True, weighted=False, index_bits=64)
    _raises(lambda: call(table, i4, i4, combiners="sum,max", inits="0.0,minus", **base),
            "is not a number")
    _raises(lambda: multi(table, i4, i4[:3], 3, ("sum", "max")), "segment_ids")
    _raises(lambda: multi(table, i4.astype(jnp.float32), i4, 3, ("sum", "max")), "s32 or s64")
    _raises(lambda: call(table, i4, i4, i4.astype(jnp.float32), combiners="sum,max",
                         inits="0.0,-inf", **base), "weighted=false")
    _raises(lambda: multi(table, i4, i4, 3, ("sum", "max"), weights=i4[:3].astype(jnp.float32)),
            "weights shape")
    uneven = jax.ffi.ffi_call("ember.multi_segment_reduce",
                              [jax.ShapeDtypeStruct((3, 4), jnp.float32),
                               jax.ShapeDtypeStruct((2, 4), jnp.float32)])
    _raises(lambda: uneven(table, i4, i4, combiners="sum,max", inits="0.0,-inf", **base),
            "same rows")


HLO_EXAMPLE = """
HloModule ember_multi_example, entry_computation_layout={(f32[6,2]{1,0}, s32[4]{0}, s32[4]{0})->(f32[4,2]{1,0}, f32[4,2]{1,0})}

ENTRY %main (table: f32[6,2], idx: s32[4], seg: s32[4]) -> (f32[4,2], f32[4,2]) {
  %table = f32[6,2]{1,0} parameter(0)
  %idx = s32[4]{0} parameter(1)
  %seg = s32[4]{0} parameter(2)
  %m = (f32[4,2]{1,0}, f32[4,2]{1,0}) custom-call(%table, %idx, %seg), custom_call_target="ember.multi_segment_reduce", api_version=API_VERSION_TYPED_FFI, backend_config={combiners = "sum,max", index_bits = 64 : i64, index_mode = "clip", inits = "0.0,-inf", weighted = false, wrap_negative = true}
  %total = f32[4,2]{1,0} get-tuple-element(%m), index=0
  %largest = f32[4,2]{1,0} get-tuple-element(%m), index=1
  ROOT %r = (f32[4,2]{1,0}, f32[4,2]{1,0}) tuple(%total, %largest)
}
"""


def test_multi_hlo_text_example_runs():
    """The HLO text example of docs/CUSTOM_CALL.md compiles and runs on XLA:CPU."""
    args = [np.arange(12, dtype=np.float32).reshape(6, 2), np.array([0, 1, -1, 9], np.int32),
            np.array([0, 0, 2, 1], np.int32)]
    total, largest = run_hlo_text(HLO_EXAMPLE, args)
    np.testing.assert_array_equal(total, [[2, 4], [10, 11], [10, 11], [0, 0]])
    np.testing.assert_array_equal(largest, [[2, 3], [10, 11], [10, 11], [-np.inf, -np.inf]])
