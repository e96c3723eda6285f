# ruff: noqa: E501  (the HLO text example is kept verbatim, as in docs/CUSTOM_CALL.md)
"""ember.grouped_segment_reduce: k tables in one custom-call, bit-identical per table to
ember.segment_reduce and to plain JAX (jnp.take-style gather + jax.ops.segment_*)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_kernels import (  # noqa: E402  (the shared helpers of the kernel tests)
    COMBINERS,
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

# (rows N, D, lookups L, segments S): a big table (split over threads: over 2^20 element-steps,
# twice kGroupedParallelWork), small ones (grouped into one part), an empty lookup list, a
# one-row table and a wide row.
SPECS = [(3000, 64, 24000, 900), (13, 5, 60, 7), (7, 8, 0, 3), (1, 4, 9, 2), (40, 136, 500, 31)]


def grouped(tables, idx, seg, nums, out_dtypes=None, **a):
    out_dtypes = out_dtypes or [t.dtype for t in tables]
    shapes = [
        jax.ShapeDtypeStruct((int(s), t.shape[1]), dt)
        for t, s, dt in zip(tables, nums, out_dtypes, strict=True)
    ]
    call = jax.ffi.ffi_call("ember.grouped_segment_reduce", shapes)
    ops = [x for triple in zip(tables, idx, seg, strict=True) for x in triple]
    return call(*ops, **a)


def _data(rng, dtype, sorted_ids=False, specs=SPECS):
    tables, idx, seg, nums = [], [], [], []
    for k, (n, d, length, s) in enumerate(specs):
        tables.append(make_table(rng, n, d, dtype))
        itype = jnp.int64 if k % 2 else jnp.int32  # s32 and s64 operands in one call
        with jax.enable_x64(True):
            idx.append(jnp.asarray(rng.integers(-2 * n, 2 * n, length), itype))
            if sorted_ids:
                ids = np.sort(rng.integers(0, s, length))
            else:
                ids = rng.integers(-2, s + 2, length)  # outside [0, S): dropped
            seg.append(jnp.asarray(ids, itype))
        nums.append(s)
    return tables, idx, seg, nums


@pytest.mark.parametrize("sorted_ids", [False, True], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_grouped_matches_per_table(dtype, combiner, sorted_ids):
    rng = np.random.default_rng(hash((jnp.dtype(dtype).name, combiner, sorted_ids)) % 2**32)
    tables, idx, seg, nums = _data(rng, dtype, sorted_ids)
    for mode, wrap in (("clip", False), ("fill", True)):
        a = attrs(combiner, mode, wrap, False)
        with jax.enable_x64(True):
            outs = grouped(tables, idx, seg, nums, **a)
            assert len(outs) == len(tables)
            for k, (t, i, s, num) in enumerate(zip(tables, idx, seg, nums, strict=True)):
                single = ember("segment_reduce", num, t, i, s, **a)
                assert_same_bits(outs[k], single)  # bitwise, sqrt_n included
                want = reference(t, i, s, num, None, combiner, mode, wrap)
                assert_same_bits(outs[k], want, ulps(combiner))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda t: jnp.dtype(t).name)
def test_grouped_f32_results_and_mixed_types(dtype):
    rng = np.random.default_rng(5)
    tables, idx, seg, nums = _data(rng, dtype)
    tables[1] = tables[1].astype(jnp.float32)  # tables of different types in one call
    outs_t = [jnp.float32] * len(tables)
    a = attrs("sum", "fill", True, False)
    with jax.enable_x64(True):
        outs = grouped(tables, idx, seg, nums, out_dtypes=outs_t, **a)
        for k, (t, i, s, num) in enumerate(zip(tables, idx, seg, nums, strict=True)):
            single = ember("segment_reduce", num, t, i, s, out_dtype=jnp.float32, **a)
            assert_same_bits(outs[k], single)
            want = reference(t, i, s, num, None, "sum", "fill", True, out_dtype=jnp.float32)
            assert_same_bits(outs[k], want)


def test_grouped_single_table_and_jit_concat():
    rng = np.random.default_rng(6)
    tables, idx, seg, nums = _data(rng, jnp.float32, True, specs=[(500, 32, 4000, 256)] * 3)
    a = attrs("sum", "fill", True, False)

    def stage(*ops):
        k = len(ops) // 3
        return jnp.concatenate(grouped(ops[:k], ops[k : 2 * k], ops[2 * k :], nums, **a), axis=1)

    with jax.enable_x64(True):
        got = jax.jit(stage)(*tables, *idx, *seg)
        want = jnp.concatenate(
            [
                reference(t, i, s, n, None, "sum", "fill", True)
                for t, i, s, n in zip(tables, idx, seg, nums, strict=True)
            ],
            axis=1,
        )
        assert_same_bits(got, want)
        one = grouped(tables[:1], idx[:1], seg[:1], nums[:1], **a)
        assert_same_bits(
            one[0], reference(tables[0], idx[0], seg[0], nums[0], None, "sum", "fill", True)
        )


def test_sorted_segment_ids_fast_path_weighted():
    """Sorted, in-range segment ids skip the counting sort; weights are then indexed by the plan
    entry itself. Checked against XLA for segment_reduce (weighted) too."""
    rng = np.random.default_rng(7)
    n, d, length, s = 300, 16, 2000, 150
    table = make_table(rng, n, d, jnp.float32)
    idx = jnp.asarray(rng.integers(0, n, length), jnp.int32)
    w = jnp.asarray(rng.standard_normal(length), jnp.float32)
    for ids in (
        np.sort(rng.integers(0, s, length)),
        np.repeat(np.arange(s), -(-length // s))[:length],
        np.sort(rng.integers(0, s // 2, length)) * 2,  # every other segment empty
    ):
        seg = jnp.asarray(ids, jnp.int32)
        for combiner in ("sum", "mean", "max"):
            a = attrs(combiner, "clip", False, True)
            got = ember("segment_reduce", s, table, idx, seg, w, **a)
            want = reference(table, idx, seg, s, w, combiner, "clip", False)
            assert_same_bits(got, want)


def _raises(fn, match: str) -> None:
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn())


def test_grouped_invalid_operands_raise_not_crash():
    t = jnp.ones((4, 3), jnp.float32)
    i = jnp.zeros((5,), jnp.int32)
    ok = attrs("sum", "clip", False, False)
    out = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    call2 = jax.ffi.ffi_call("ember.grouped_segment_reduce", [out, out])
    call1 = jax.ffi.ffi_call("ember.grouped_segment_reduce", [out])
    _raises(lambda: call2(t, i, i, **ok), "need 1 results, got 2")
    _raises(lambda: call1(t, i, **ok), "triples")
    _raises(lambda: call1(t, i, i, **attrs("sum", "clip", False, True)), "weighted")
    _raises(lambda: call1(t, i, i[:3], **ok), "segment_ids has 3")
    bad = jax.ffi.ffi_call(
        "ember.grouped_segment_reduce", [out, jax.ShapeDtypeStruct((2, 4), jnp.float32)]
    )
    _raises(lambda: bad(t, i, i, t, i, i, **ok), "table 1")
    _raises(lambda: call1(t, i.astype(jnp.float32), i, **ok), "s32 or s64")
    assert call1(t, i, i, **ok)[0].shape == (2, 3)  # still alive


HLO_EXAMPLE = """
HloModule ember_grouped_example, entry_computation_layout={(f32[6,2]{1,0}, s32[4]{0}, s32[4]{0}, f32[3,4]{1,0}, s32[3]{0}, s32[3]{0})->(f32[3,2]{1,0}, f32[2,4]{1,0})}

ENTRY %main (tab1: f32[6,2], ids1: s32[4], seg1: s32[4], tab2: f32[3,4], ids2: s32[3], seg2: s32[3]) -> (f32[3,2], f32[2,4]) {
  %tab1 = f32[6,2]{1,0} parameter(0)
  %ids1 = s32[4]{0} parameter(1)
  %seg1 = s32[4]{0} parameter(2)
  %tab2 = f32[3,4]{1,0} parameter(3)
  %ids2 = s32[3]{0} parameter(4)
  %seg2 = s32[3]{0} parameter(5)
  %g = (f32[3,2]{1,0}, f32[2,4]{1,0}) custom-call(%tab1, %ids1, %seg1, %tab2, %ids2, %seg2), custom_call_target="ember.grouped_segment_reduce", api_version=API_VERSION_TYPED_FFI, backend_config={combiner = "sum", index_bits = 64 : i64, index_mode = "fill", init = 0.000000e+00 : f64, weighted = false, wrap_negative = true}
  %o1 = f32[3,2]{1,0} get-tuple-element(%g), index=0
  %o2 = f32[2,4]{1,0} get-tuple-element(%g), index=1
  ROOT %r = (f32[3,2]{1,0}, f32[2,4]{1,0}) tuple(%o1, %o2)
}
"""


def test_grouped_hlo_text_example_runs():
    """The HLO text example of docs/CUSTOM_CALL.md compiles and runs on XLA:CPU."""
    args = [
        np.arange(12, dtype=np.float32).reshape(6, 2),
        np.array([0, 1, -1, 9], np.int32),
        np.array([0, 0, 2, 1], np.int32),
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([2, 0, 2], np.int32),
        np.array([1, 1, 0], np.int32),
    ]
    outs = run_hlo_text(HLO_EXAMPLE, args)
    nan = np.nan
    np.testing.assert_array_equal(outs[0], [[2, 4], [nan, nan], [10, 11]])
    np.testing.assert_array_equal(outs[1], [[8, 9, 10, 11], [8, 10, 12, 14]])
