"""Numeric tests of the native ember kernels against plain JAX on XLA:CPU.

Every result is compared bit for bit with the plain-JAX formulation (jnp.take-style gather +
jax.ops.segment_* / lax.scatter, which is what the rewrites replace), with one exception: NaN
payloads and NaN signs are not compared, only NaN positions. XLA's own NaN bits depend on how
LLVM happened to order the operands of an add/max (e.g. max(1, -NaN) gives +NaN but
min(1, -NaN) gives -NaN), which is not part of the contract.

Tolerance: sqrt_n may differ by a few ulps (<= 4). XLA rewrites x / sqrt(n) into x * rsqrt(n)
and its CPU rsqrt is an approximation (not the correctly rounded 1/sqrt(n) the kernel uses; it
may even differ between CPU models). mean, computed as x * (1/n) like XLA does, is bit-exact.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

native = pytest.importorskip("ember_xla.native")

try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

DTYPES = [jnp.float32, jnp.bfloat16, jnp.float16]
COMBINERS = ["sum", "max", "min", "mean", "sqrt_n"]
DEFAULT_INIT = {"sum": 0.0, "mean": 0.0, "sqrt_n": 0.0, "max": -math.inf, "min": math.inf}


# ----------------------------------------------------------------------------- helpers


def assert_same_bits(got, want, max_ulp: int = 0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    nan_got, nan_want = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(nan_got, nan_want, err_msg="NaN positions differ")
    uint = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    bits_got = np.where(nan_got, 0, got.view(uint))
    bits_want = np.where(nan_want, 0, want.view(uint))
    diff = np.abs(bits_got.astype(np.int64) - bits_want.astype(np.int64))  # same sign: ulps
    bad = np.argwhere(diff > max_ulp)
    assert bad.size == 0, (
        f"{len(bad)} elements differ, first at {tuple(bad[0])}: "
        f"got {got[tuple(bad[0])]!r} want {want[tuple(bad[0])]!r}"
    )


def make_table(rng: np.random.Generator, n: int, d: int, dtype) -> jnp.ndarray:
    """Values of mixed magnitude (so low-precision adds round), plus NaN, +-0, denormal rows."""
    t = rng.standard_normal((n, d)) * np.exp2(rng.integers(-8, 9, size=(n, d)))
    if n >= 6:
        t[1] = 0.0
        t[2] = -0.0
        t[3, 0] = np.nan
        t[4] = 1e-40 * rng.standard_normal(d)  # f32 denormals (0 in bf16/f16 after rounding)
        t[5] = 6e-6 * rng.standard_normal(d)  # f16 subnormal range
    return jnp.asarray(t.astype(np.float32)).astype(dtype)


def attrs(
    combiner: str,
    mode: str,
    wrap: bool,
    weighted: bool,
    init: float | None = None,
    index_bits: int = 64,
):
    init = DEFAULT_INIT[combiner] if init is None else init
    return dict(
        combiner=combiner,
        index_mode=mode,
        wrap_negative=wrap,
        weighted=weighted,
        init=float(init),
        index_bits=np.int64(index_bits),
    )


def ember(kind: str, rows: int, table, *operands, out_dtype=None, **attributes):
    out_dtype = table.dtype if out_dtype is None else out_dtype
    if kind == "padded_bag":
        attributes.setdefault("sum_order",
                              "sequential_fma" if attributes.get("weighted") else "sequential")
        attributes.setdefault("row_type", "")
    call = jax.ffi.ffi_call(
        f"ember.{kind}", jax.ShapeDtypeStruct((rows, table.shape[1]), out_dtype)
    )
    return call(table, *operands, **attributes)


def looked_up(table, idx, mode: str, wrap: bool, index_bits: int = 64):
    """The contract's index preprocessing + gather, in plain JAX."""
    n = table.shape[0]
    i = idx.astype(jnp.int64 if idx.dtype == jnp.int64 else jnp.int32)
    if wrap:
        i = jnp.where(i < 0, i + n, i)
    if index_bits == 32:
        i = i.astype(jnp.int32)  # XLA's s64 -> s32 convert: keeps the low 32 bits
    rows = jnp.take(table, jnp.clip(i, 0, n - 1), axis=0)
    if mode == "clip":
        return rows
    return jnp.where(((i >= 0) & (i < n))[:, None], rows, jnp.nan)


_DN = lax.ScatterDimensionNumbers(
    update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
)


def ulps(combiner: str) -> int:
    return 4 if combiner == "sqrt_n" else 0


def reference(
    table, idx, seg, num, weights, combiner, mode, wrap, init=None, index_bits=64, out_dtype=None,
    bags=None,
):
    """segment_* over looked-up rows; seg ids outside [0, num) are dropped.

    With out_dtype=f32 (for a bf16/f16 table) the looked-up (and weighted) rows are converted to
    f32 first and reduced in f32; weights of T's type multiply before the convert, f32 weights
    after it. ``bags`` (B, P): the lookups are padded bags, and an f32 weighted product is
    summed the way XLA:CPU reduces ``rows * w`` over P (the multiply fused into the reduce and
    contracted to an FMA: ember.padded_bag's contract)."""
    rows = looked_up(table, idx, mode, wrap, index_bits)
    late_weights = weights is not None and weights.dtype != table.dtype  # f32, after the convert
    if weights is not None and not late_weights:
        rows = rows * weights[:, None]
    if out_dtype is not None:
        rows = rows.astype(out_dtype)
    if late_weights:
        rows = rows * weights[:, None]
    dtype = rows.dtype
    if bags is not None and weights is not None and dtype == jnp.float32 and combiner in (
            "sum", "mean", "sqrt_n"):
        total = jnp.sum(rows.reshape(*bags, rows.shape[-1]), axis=1)
        if combiner == "sum":
            return total
        count = jnp.full((bags[0],), bags[1], jnp.float32)
        denom = count if combiner == "mean" else jnp.sqrt(count)
        return jnp.where(count[:, None] > 0, total / denom[:, None], DEFAULT_INIT[combiner])
    if init is None and combiner in ("sum", "max", "min"):
        op = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max, "min": jax.ops.segment_min}[
            combiner
        ]
        return op(rows, seg, num_segments=num)
    if combiner in ("sum", "max", "min"):
        scatter = {"sum": lax.scatter_add, "max": lax.scatter_max, "min": lax.scatter_min}[combiner]
        start = jnp.full((num, table.shape[1]), init, dtype)
        return scatter(start, seg[:, None], rows, _DN, mode=lax.GatherScatterMode.FILL_OR_DROP)
    total = jax.ops.segment_sum(rows, seg, num_segments=num).astype(jnp.float32)
    count = jax.ops.segment_sum(jnp.ones(seg.shape, jnp.float32), seg, num_segments=num)
    denom = count if combiner == "mean" else jnp.sqrt(count)
    empty = DEFAULT_INIT[combiner] if init is None else init
    out = jnp.where(count[:, None] > 0, total / denom[:, None], empty)
    return out.astype(dtype)


def offsets_to_segments(offsets: np.ndarray, length: int) -> np.ndarray:
    """Lookup j belongs to bag b with offsets[b] <= j < offsets[b+1]; others get id B (dropped)."""
    bags = len(offsets) - 1
    seg = np.full(length, bags, np.int32)
    for b in range(bags):
        seg[offsets[b] : offsets[b + 1]] = b
    return seg


# ----------------------------------------------------------------------------- segment_reduce

N, D, L, S = 13, 5, 60, 7


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_segment_reduce_matches_xla(dtype, combiner, weighted):
    rng = np.random.default_rng(hash((jnp.dtype(dtype).name, combiner, weighted)) % 2**32)
    table = make_table(rng, N, D, dtype)
    idx = jnp.asarray(rng.integers(-2 * N, 2 * N, L), jnp.int32)  # negatives, OOB, duplicates
    seg = rng.integers(-2, S + 2, L)  # ids outside [0, S) are dropped
    seg[seg == 3] = 2  # segment 3 stays empty
    seg = jnp.asarray(seg, jnp.int32)
    w = jnp.asarray(rng.standard_normal(L), dtype) if weighted else None
    ops = (idx, seg) + ((w,) if weighted else ())
    flip = (COMBINERS.index(combiner) + weighted) % 2 == 1
    for mode, wrap in (("clip", flip), ("fill", not flip)):
        if True:
            a = attrs(combiner, mode, wrap, weighted)
            got = jax.jit(lambda t, *o, a=a: ember("segment_reduce", S, t, *o, **a))(table, *ops)
            want = jax.jit(
                lambda t, i, s, w, m=mode, wr=wrap: reference(t, i, s, S, w, combiner, m, wr)
            )(table, idx, seg, w)
            assert_same_bits(got, want, ulps(combiner))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # f16 init -> -inf
@pytest.mark.parametrize(
    "combiner,init", [("sum", 1.5), ("max", -3.4028234663852886e38), ("min", 0.25)]
)
def test_custom_init(combiner, init):
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        table = make_table(rng, N, D, dtype)
        idx = jnp.asarray(rng.integers(0, N, L), jnp.int32)
        seg = jnp.asarray(rng.integers(0, S - 2, L), jnp.int32)  # last two segments empty
        got = jax.jit(
            lambda t, i, s: ember(
                "segment_reduce", S, t, i, s, **attrs(combiner, "clip", True, False, init)
            )
        )(table, idx, seg)
        want = jax.jit(lambda t, i, s: reference(t, i, s, S, None, combiner, "clip", True, init))(
            table, idx, seg
        )
        assert_same_bits(got, want)


def test_s64_indices_and_segment_ids():
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        for dtype in DTYPES:
            table = make_table(rng, N, D, dtype)
            raw = rng.integers(-2 * N, 2 * N, L)
            raw[:3] = [2**40, -(2**40), 2**33 + 1]  # far outside s32
            idx = jnp.asarray(raw, jnp.int64)
            seg = jnp.asarray(rng.integers(-1, S + 1, L), jnp.int64)
            seg32 = seg.astype(jnp.int32)
            for mode in ("clip", "fill"):
                a = attrs("sum", mode, True, False)
                want = jax.jit(lambda t, i, s, m=mode: reference(t, i, s, S, None, "sum", m, True))(
                    table, idx, seg
                )
                for s_ids in (seg, seg32):  # index and segment dtypes may differ
                    got = jax.jit(lambda t, i, s, a=a: ember("segment_reduce", S, t, i, s, **a))(
                        table, idx, s_ids
                    )
                    assert_same_bits(got, want)
            p_ids = idx[:48].reshape(6, 8)
            got = jax.jit(
                lambda t, i: ember("padded_bag", 6, t, i, **attrs("max", "fill", True, False))
            )(table, p_ids)
            want = reference(
                table, p_ids.reshape(-1), jnp.repeat(jnp.arange(6), 8), 6, None, "max", "fill", True
            )
            assert_same_bits(got, want)


def test_index_bits_32_truncates_like_xla_convert():
    """index_bits=32: after wrap_negative the s64 index is truncated to s32 (two's complement,
    XLA's s64->s32 convert), then clipped/filled; compared with JAX's own convert under x64."""
    rng = np.random.default_rng(4)
    huge = [2**31, 2**31 + 3, 2**32 + 5, 2**32 - 1, -(2**31) - 1, 2**40 + 7, -(2**32) + 2, 2**33]
    with jax.enable_x64(True):
        for dtype in (jnp.float32, jnp.bfloat16):
            table = make_table(rng, N, D, dtype)
            raw = rng.integers(-2 * N, 2 * N, L)
            raw[: len(huge)] = huge
            idx = jnp.asarray(raw, jnp.int64)
            seg = jnp.asarray(rng.integers(0, S, L), jnp.int32)
            results = {}
            for mode, wrap, bits in (
                (m, w, b) for m in ("clip", "fill") for w in (False, True) for b in (32, 64)
            ):
                a = attrs("sum", mode, wrap, False, index_bits=bits)
                got = jax.jit(lambda t, i, s, a=a: ember("segment_reduce", S, t, i, s, **a))(
                    table, idx, seg
                )
                want = jax.jit(
                    lambda t, i, s, m=mode, w=wrap, b=bits: reference(
                        t, i, s, S, None, "sum", m, w, index_bits=b
                    )
                )(table, idx, seg)
                assert_same_bits(got, want)
                results[mode, wrap, bits] = np.asarray(got)
                ids = idx[:48].reshape(6, 8)
                got = ember(
                    "padded_bag", 6, table, ids, **attrs("max", mode, wrap, False, None, bits)
                )
                want = reference(
                    table,
                    ids.reshape(-1),
                    jnp.repeat(jnp.arange(6), 8),
                    6,
                    None,
                    "max",
                    mode,
                    wrap,
                    index_bits=bits,
                )
                assert_same_bits(got, want)
            # The truncation really changes results here (2**32 + 5 -> row 5, not clipped).
            assert not np.array_equal(results["clip", True, 32], results["clip", True, 64])


@pytest.mark.parametrize("weights", ["none", "table", "f32"])
@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda t: jnp.dtype(t).name)
def test_f32_result_for_low_precision_table(dtype, combiner, weights):
    """An f32 result for a bf16/f16 table: convert(rows) then reduce in f32. Weights of T's type
    multiply before the convert (rounded to T); f32 weights multiply after it, in f32."""
    rng = np.random.default_rng(hash((jnp.dtype(dtype).name, combiner, weights)) % 2**32)
    table = make_table(rng, N, D, dtype)
    bags, width = 9, 6
    ids = jnp.asarray(rng.integers(-2 * N, 2 * N, (bags, width)), jnp.int32)
    wdt = {"none": None, "table": dtype, "f32": jnp.float32}[weights]
    w = None if wdt is None else jnp.asarray(rng.standard_normal((bags, width)), wdt)
    flat_w = None if w is None else w.reshape(-1)
    seg_p = jnp.repeat(jnp.arange(bags, dtype=jnp.int32), width)
    seg_u = jnp.asarray(rng.integers(-1, bags + 1, bags * width), jnp.int32)
    offsets = jnp.asarray([0, 0, 7, 7, 20, 33, 33, 40, 51, 54], jnp.int32)
    seg_o = jnp.asarray(offsets_to_segments(np.asarray(offsets), bags * width))
    f32 = jnp.float32
    for mode, wrap in (("clip", False), ("fill", True)):
        a = attrs(combiner, mode, wrap, w is not None)
        ww = () if w is None else (w,)
        fw = () if w is None else (flat_w,)
        cases = (
            (ember("padded_bag", bags, table, ids, *ww, out_dtype=f32, **a), seg_p),
            (
                ember(
                    "segment_reduce", bags, table, ids.reshape(-1), seg_u, *fw, out_dtype=f32, **a
                ),
                seg_u,
            ),
            (
                ember(
                    "offsets_bag", bags, table, ids.reshape(-1), offsets, *fw, out_dtype=f32, **a
                ),
                seg_o,
            ),
        )
        for got, seg in cases:
            padded = seg is seg_p  # the ember.padded_bag case
            want = jax.jit(
                lambda t, i, s, w, m=mode, wr=wrap, pb=padded: reference(
                    t, i, s, bags, w, combiner, m, wr, out_dtype=f32,
                    bags=(bags, width) if pb else None,
                )
            )(table, ids.reshape(-1), seg, flat_w)
            assert got.dtype == jnp.float32
            assert_same_bits(got, want, ulps(combiner))


# ----------------------------------------------------------------------------- bags


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_padded_bag_matches_xla(dtype, combiner, weighted):
    rng = np.random.default_rng(11)
    bags, width = 9, 6
    table = make_table(rng, N, D, dtype)
    ids = jnp.asarray(rng.integers(-2 * N, 2 * N, (bags, width)), jnp.int32)
    w = jnp.asarray(rng.standard_normal((bags, width)), dtype) if weighted else None
    seg = jnp.repeat(jnp.arange(bags, dtype=jnp.int32), width)
    for mode, wrap in (("clip", False), ("fill", True)):
        a = attrs(combiner, mode, wrap, weighted)
        ops = (ids,) + ((w,) if weighted else ())
        got = jax.jit(lambda t, *o, a=a: ember("padded_bag", bags, t, *o, **a))(table, *ops)
        flat_w = None if w is None else w.reshape(-1)
        want = jax.jit(
            lambda t, i, w, m=mode, wr=wrap: reference(
                t, i.reshape(-1), seg, bags, w, combiner, m, wr, bags=(bags, width)
            )
        )(table, ids, flat_w)
        assert_same_bits(got, want, ulps(combiner))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: jnp.dtype(t).name)
def test_offsets_bag_matches_xla(dtype, combiner, weighted):
    rng = np.random.default_rng(5)
    table = make_table(rng, N, D, dtype)
    offsets = np.array([2, 2, 9, 9, 9, 20, 31, 31, 50], np.int32)  # empty bags, unused ends
    bags = len(offsets) - 1
    idx = jnp.asarray(rng.integers(-2 * N, 2 * N, L), jnp.int32)
    w = jnp.asarray(rng.standard_normal(L), dtype) if weighted else None
    seg = jnp.asarray(offsets_to_segments(offsets, L))
    for mode, wrap in (("clip", True), ("fill", False)):
        a = attrs(combiner, mode, wrap, weighted)
        ops = (idx, jnp.asarray(offsets)) + ((w,) if weighted else ())
        got = jax.jit(lambda t, *o, a=a: ember("offsets_bag", bags, t, *o, **a))(table, *ops)
        want = jax.jit(
            lambda t, i, s, w, m=mode, wr=wrap: reference(t, i, s, bags, w, combiner, m, wr)
        )(table, idx, seg, w)
        assert_same_bits(got, want, ulps(combiner))


def test_empty_inputs():
    table = make_table(np.random.default_rng(0), N, D, jnp.float32)
    none = jnp.zeros((0,), jnp.int32)
    got = ember("segment_reduce", 4, table, none, none, **attrs("max", "clip", False, False))
    assert_same_bits(got, jnp.full((4, D), -jnp.inf, jnp.float32))
    got = ember(
        "offsets_bag",
        3,
        table,
        none,
        jnp.zeros((4,), jnp.int32),
        **attrs("mean", "fill", False, False),
    )
    assert_same_bits(got, jnp.zeros((3, D), jnp.float32))
    got = ember(
        "padded_bag", 3, table, jnp.zeros((3, 0), jnp.int32), **attrs("sum", "clip", False, False)
    )
    assert_same_bits(got, jnp.zeros((3, D), jnp.float32))
    got = ember(
        "padded_bag", 0, table, jnp.zeros((0, 4), jnp.int32), **attrs("sum", "clip", False, False)
    )
    assert got.shape == (0, D)


# ----------------------------------------------------------------------------- threaded path


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=lambda t: jnp.dtype(t).name)
def test_large_inputs_use_threads_and_match(dtype):
    # (L + S) * D = 0.45M element-steps, well above the 64k threshold for going parallel.
    rng = np.random.default_rng(1)
    n, d, length, segs = 3000, 64, 6000, 1000
    table = make_table(rng, n, d, dtype)
    idx = jnp.asarray(rng.integers(-10, n + 10, length), jnp.int32)
    seg = rng.integers(0, segs, length)
    seg[seg % 97 == 0] = segs + 5  # a few dropped lookups, and some empty segments
    seg = jnp.asarray(seg, jnp.int32)
    w = jnp.asarray(rng.standard_normal(length), dtype)
    for combiner, weighted in (("sum", True), ("max", False)):
        if True:
            ops = (idx, seg) + ((w,) if weighted else ())
            a = attrs(combiner, "fill", True, weighted)
            got = jax.jit(lambda t, *o, a=a: ember("segment_reduce", segs, t, *o, **a))(table, *ops)
            want = jax.jit(
                lambda t, i, s, w, c=combiner, wt=weighted: reference(
                    t, i, s, segs, w if wt else None, c, "fill", True
                )
            )(table, idx, seg, w)
            assert_same_bits(got, want)
    ids = idx.reshape(600, 10)
    got = ember("padded_bag", 600, table, ids, **attrs("sum", "clip", True, False))
    want = reference(table, idx, jnp.repeat(jnp.arange(600), 10), 600, None, "sum", "clip", True)
    assert_same_bits(got, want)


def test_concurrent_calls_share_the_pool_safely():
    """Several threads calling big kernels at once (XLA may run independent custom-calls
    concurrently): every call must still get exactly its own result."""
    import threading

    rng = np.random.default_rng(2)
    n, d, length, segs = 5000, 48, 20000, 700
    table = make_table(rng, n, d, jnp.float32)
    jobs = []
    for _ in range(4):
        idx = jnp.asarray(rng.integers(0, n, length), jnp.int32)
        seg = jnp.asarray(rng.integers(0, segs, length), jnp.int32)
        a = attrs("sum", "clip", False, False)
        fn = jax.jit(lambda tb, i, s, a=a: ember("segment_reduce", segs, tb, i, s, **a))
        want = np.asarray(reference(table, idx, seg, segs, None, "sum", "clip", False))
        jobs.append((fn, idx, seg, want))
    for fn, idx, seg, _ in jobs:
        fn(table, idx, seg).block_until_ready()  # compile outside the threads
    errors = []

    def work(k):
        fn, idx, seg, want = jobs[k]
        try:
            for _ in range(10):
                assert_same_bits(fn(table, idx, seg), want)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("d", [4, 8, 24, 56, 128, 136, 264])
def test_vectorized_sum_widths_match(d):
    """The f32 unweighted-sum fast path keeps rows in vector registers in passes of 16/8/4/2/1
    vectors: every width split must still give XLA's bits (incl. init = -0.0, fill NaN rows)."""
    rng = np.random.default_rng(d)
    n, length, segs = 300, 3000, 50
    table = make_table(rng, n, d, jnp.float32)
    idx = jnp.asarray(rng.integers(-5, n + 5, length), jnp.int32)
    seg = jnp.asarray(rng.integers(-1, segs, length), jnp.int32)
    for init in (None, -0.0, 2.5):
        a = attrs("sum", "fill", False, False, init)
        got = ember("segment_reduce", segs, table, idx, seg, **a)
        want = reference(table, idx, seg, segs, None, "sum", "fill", False, init)
        assert_same_bits(got, want)
    ids = idx[: 60 * 50].reshape(60, 50)
    got = ember("padded_bag", 60, table, ids, **attrs("sum", "clip", True, False))
    want = reference(
        table, ids.reshape(-1), jnp.repeat(jnp.arange(60), 50), 60, None, "sum", "clip", True
    )
    assert_same_bits(got, want)


@pytest.mark.parametrize("d", [4, 8, 24, 64, 136, 256, 272, 528])
@pytest.mark.parametrize("combiner", ["max", "min"])
def test_vectorized_max_min_widths_match(d, combiner):
    """The f32 unweighted max/min fast path (reduce_minmax.h: lane-wise XlaMax/XlaMin in passes
    of 16 (AVX-512) or 8, then 4/2/1 vectors) gives XLA's bits: NaN (in the first and the last
    column), +-0 and denormal rows, fill NaN rows, empty segments, several inits (a NaN init
    too). Clip mode's bags mostly meet no NaN (the NaN-free selection); a bag that met one is
    done again with every NaN rule (reduce_minmax.h)."""
    rng = np.random.default_rng(100 + d)
    n, length, segs = 300, 3000, 50
    table = make_table(rng, n, d, jnp.float32).at[7, d - 1].set(jnp.nan)
    idx = jnp.asarray(rng.integers(-5, n + 5, length), jnp.int32)
    seg = jnp.asarray(rng.integers(-1, segs + 3, length), jnp.int32)  # some segments empty
    for mode, init in itertools.product(("fill", "clip"), (None, 2.5, -7.0, float("nan"))):
        a = attrs(combiner, mode, False, False, init)
        got = ember("segment_reduce", segs + 5, table, idx, seg, **a)
        want = reference(table, idx, seg, segs + 5, None, combiner, mode, False, init)
        assert_same_bits(got, want)
    ids = idx[: 60 * 50].reshape(60, 50)
    got = ember("padded_bag", 60, table, ids, **attrs(combiner, "clip", True, False))
    want = reference(
        table, ids.reshape(-1), jnp.repeat(jnp.arange(60), 50), 60, None, combiner, "clip", True
    )
    assert_same_bits(got, want)


@pytest.mark.parametrize("d", [8, 64, 256])
@pytest.mark.parametrize("combiner", ["max", "min"])
def test_vectorized_max_min_signed_zeros(d, combiner):
    """Bags whose max (min) is a zero: +0 and -0 rows, denormals of both signs (zeros under
    XLA's DAZ) and values on the other side of zero only, so every result is decided by the
    signed-zero rule (max(-0, +0) = +0, min = -0), in clip mode (no NaN: the NaN-free
    selection)."""
    rng = np.random.default_rng(7 + d)
    n, length, segs = 64, 2000, 40
    sign = -1.0 if combiner == "max" else 1.0
    choices = np.array([0.0, -0.0, 1e-40, -1e-40, sign * 1.5, sign * 3e-3], np.float32)
    table = jnp.asarray(rng.choice(choices, size=(n, d)).astype(np.float32))
    idx = jnp.asarray(rng.integers(0, n, length), jnp.int32)
    seg = jnp.asarray(np.sort(rng.integers(0, segs, length)), jnp.int32)
    for init in (None, -0.0, 0.0):
        a = attrs(combiner, "clip", False, False, init)
        got = ember("segment_reduce", segs, table, idx, seg, **a)
        want = reference(table, idx, seg, segs, None, combiner, "clip", False, init)
        assert_same_bits(got, want)
        w = np.asarray(want)
        ruled = (w == 0) & (np.signbit(w) == (combiner == "min"))  # max: +0, min: -0
        assert ruled.mean() > 0.5, "the signed-zero rule decides most results"


# ----------------------------------------------------------------------------- errors


def _raises(fn, match: str) -> None:
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn())


def test_invalid_operands_raise_not_crash():
    table = make_table(np.random.default_rng(0), N, D, jnp.float32)
    i4 = jnp.arange(4, dtype=jnp.int32)
    ok = attrs("sum", "clip", False, False)
    flat = jax.ffi.ffi_call("ember.segment_reduce", jax.ShapeDtypeStruct((3, D), table.dtype))
    _raises(lambda: flat(table.reshape(-1), i4, i4, **ok), "rank 2")
    _raises(lambda: ember("segment_reduce", 3, table, i4, i4[:3], **ok), "segment_ids")
    _raises(
        lambda: ember("segment_reduce", 3, table, i4.reshape(2, 2), i4.reshape(2, 2), **ok),
        "rank 1",
    )
    _raises(
        lambda: ember("segment_reduce", 3, table, i4.astype(jnp.float32), i4, **ok), "s32 or s64"
    )
    _raises(lambda: ember("padded_bag", 3, table, i4, **ok), "rank 2")
    _raises(lambda: ember("padded_bag", 3, table, i4.reshape(2, 2), **ok), "bags")
    _raises(
        lambda: ember("offsets_bag", 3, table, i4, jnp.array([0, 1, 2], jnp.int32), **ok), "B\\+1"
    )
    _raises(
        lambda: ember("offsets_bag", 2, table, i4, jnp.array([0, 3, 2], jnp.int32), **ok),
        "non-decreasing",
    )
    _raises(
        lambda: ember("offsets_bag", 2, table, i4, jnp.array([0, 3, 5], jnp.int32), **ok),
        "non-decreasing",
    )
    _raises(
        lambda: ember(
            "segment_reduce", 3, table, i4, i4, **attrs("avg", "clip", False, False, 0.0)
        ),
        "combiner",
    )
    _raises(
        lambda: ember("segment_reduce", 3, table, i4, i4, **attrs("sum", "wrap", False, False)),
        "index_mode",
    )
    _raises(
        lambda: ember("segment_reduce", 3, table, i4, i4, **attrs("sum", "clip", False, True)),
        "no weights",
    )
    _raises(lambda: ember("segment_reduce", 3, table, i4, i4, jnp.ones(4), **ok), "weighted=false")
    wa = attrs("sum", "clip", False, True)
    _raises(
        lambda: ember("segment_reduce", 3, table, i4, i4, jnp.ones(4, jnp.float16), **wa),
        "weights type",
    )
    _raises(lambda: ember("segment_reduce", 3, table, i4, i4, jnp.ones(3), **wa), "weights shape")
    _raises(
        lambda: ember("segment_reduce", 3, table.astype(jnp.int32), i4, i4, **ok),
        "f32, bf16 or f16",
    )
    empty = jnp.zeros((0, D), jnp.float32)
    _raises(lambda: ember("segment_reduce", 3, empty, i4, i4, **ok), "at least one row")
    for bits in (0, 16, 63):
        bad_bits = attrs("sum", "clip", False, False, index_bits=bits)
        _raises(lambda b=bad_bits: ember("segment_reduce", 3, table, i4, i4, **b), "index_bits")
    _raises(
        lambda: ember("padded_bag", 2, table, i4.reshape(2, 2), out_dtype=jnp.float16, **ok),
        "result type",
    )
    half = table.astype(jnp.bfloat16)
    _raises(
        lambda: ember(
            "segment_reduce",
            3,
            half,
            i4,
            i4,
            jnp.ones(4, jnp.float16),
            out_dtype=jnp.float32,
            **wa,
        ),
        "weights type",
    )
    bad_out = jax.ffi.ffi_call(
        "ember.segment_reduce", jax.ShapeDtypeStruct((3, D + 1), table.dtype)
    )
    _raises(lambda: bad_out(table, i4, i4, **ok), "result must be")
    # The process is still alive and the kernels still work after all of that.
    assert ember("segment_reduce", 1, table, i4, i4 * 0, **ok).shape == (1, D)


@pytest.mark.parametrize("d", [5, 16])
@pytest.mark.parametrize("combiner", ["sum", "max", "mean"])
def test_sorted_segment_ids_folded_plan_matches_xla(combiner, d):
    """Sorted in-range segment ids take the folded plan (lookups resolved inside the reduce
    loop, no resolve pass): out-of-range, negative and duplicate indices in clip and fill mode,
    with and without wrap_negative, s32 and s64 indices, weighted, bit for bit."""
    rng = np.random.default_rng(11)
    table = make_table(rng, N, d, jnp.float32)  # d=16: the vectorized sum/max loops
    raw = rng.integers(-2 * N, 2 * N, L)
    raw[:4] = [0, 0, N - 1, -1]  # duplicates and the edges
    seg = np.sort(rng.integers(0, S, L)).astype(np.int32)
    weights = jnp.asarray(rng.standard_normal(L), jnp.float32)
    with jax.enable_x64(True):
        for idx in (jnp.asarray(raw, jnp.int32), jnp.asarray(raw, jnp.int64)):
            for mode in ("clip", "fill"):
                for wrap in (True, False):
                    for w in (None, weights):
                        a = attrs(combiner, mode, wrap, w is not None)
                        args = (table, idx, jnp.asarray(seg)) + (() if w is None else (w,))
                        got = jax.jit(lambda *x, a=a: ember("segment_reduce", S, *x, **a))(*args)
                        want = jax.jit(lambda t, i, s, m=mode, c=combiner, wr=wrap, w=w:
                                       reference(t, i, s, S, w, c, m, wr))(table, idx, seg)
                        assert_same_bits(got, want)


def test_large_result_same_bits_with_every_output_page_mode():
    """Results >= 4 MiB get huge-page advice (EMBER_XLA_OUTPUT_PAGES / EmberSetOutputPages):
    a hint only, so modes 0 (off), 1 (advice, the default) and 2 (advice + pre-fault) give the
    same bits as XLA."""
    import ctypes

    lib = native.load_library()
    lib.EmberSetOutputPages.restype = ctypes.c_int
    lib.EmberSetOutputPages.argtypes = [ctypes.c_int]
    rng = np.random.default_rng(5)
    rows, d = 10_000, 128  # a 5.1 MB f32 result
    table = make_table(rng, 500, d, jnp.float32)
    idx = jnp.asarray(rng.integers(-600, 600, 20_000), jnp.int32)
    seg = jnp.asarray(np.sort(rng.integers(0, rows, 20_000)).astype(np.int32))
    want = jax.jit(lambda t, i, s: reference(t, i, s, rows, None, "sum", "fill", True))(
        table, idx, seg)
    a = attrs("sum", "fill", True, False)
    previous = lib.EmberSetOutputPages(1)
    try:
        for mode in (0, 1, 2):
            lib.EmberSetOutputPages(mode)
            got = jax.jit(lambda t, i, s: ember("segment_reduce", rows, t, i, s, **a))(
                table, idx, seg)
            assert_same_bits(got, want)
    finally:
        lib.EmberSetOutputPages(previous)


def run_hlo_text(text: str, args: list) -> list:
    """Compile HLO text with XLA's own parser (not ours) and run it on XLA:CPU with the ember
    targets registered: the docs' HLO examples, verbatim."""
    from ember_xla.runtime.xla_cpu import compile_proto, xla_parse_text

    native.register_targets()
    return compile_proto(xla_parse_text(text)).run(list(args))
