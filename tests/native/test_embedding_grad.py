"""The gradient kernels against XLA:CPU, bit for bit (NaN positions only, not payloads).

``ember.scatter_grad`` against ``jnp.zeros((V, D)).at[ids].add(rows)`` (the scatter JAX emits
as the transpose of a lookup); ``ember.sparse_sgd`` / ``ember.sparse_adagrad`` against the dense
update XLA computes from that gradient, including learning rates for which rows without
gradient do change (the kernels then update every row)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

from ember_xla.native.rsqrt_probe import (  # noqa: E402
    native_rsqrt,
    probe_values,
    rsqrt_matches_xla,
    xla_rsqrt,
)

#: the Adagrad kernel's update is XLA's only where its rsqrt is (the rewrite fuses Adagrad
#: only then, see test_rsqrt_reproduces_xla_on_this_machine)
needs_xla_rsqrt = pytest.mark.skipif(
    not rsqrt_matches_xla(), reason="the kernel's rsqrt is not XLA:CPU's on this CPU (the "
    "rewrite then keeps Adagrad in XLA): the Adagrad kernel is not used here")


def assert_same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan_g, nan_w = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(nan_g, nan_w, err_msg="NaN positions differ")
    uint = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    bad = np.argwhere(np.where(nan_g, 0, got.view(uint)) != np.where(nan_w, 0, want.view(uint)))
    assert bad.size == 0, f"{len(bad)} differ, first {tuple(bad[0])}: {got[tuple(bad[0])]!r} " \
                          f"vs {want[tuple(bad[0])]!r}"


def scatter_grad(ids, rows, v):
    call = jax.ffi.ffi_call("ember.scatter_grad",
                            jax.ShapeDtypeStruct((v, rows.shape[1]), rows.dtype))
    return call(ids, rows)


def mixed(rng, shape, dtype):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-10, 11, size=shape))
    return np.asarray(x, dtype=np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("v,n,d", [(7, 300, 5), (1000, 64, 16), (100_000, 50, 3), (5, 0, 4),
                                   (3, 40, 1)])
def test_scatter_grad_is_xla_scatter_add(dtype, v, n, d):
    rng = np.random.default_rng(v + n + d)
    # duplicates, too-large and (after JAX's negative-index wrap) negative ids: dropped
    ids = rng.integers(-v - 3, v + 3, n).astype(np.int32)
    rows = mixed(rng, (n, d), dtype)
    if n > 4:
        rows[0, 0], rows[1, -1], rows[2, 0] = np.nan, np.inf, -0.0
    want = jax.jit(lambda i, u: jnp.zeros((v, d), dtype).at[i].add(u, mode="drop"))(ids, rows)
    wrapped = np.where(ids < 0, ids + v, ids)  # what the scatter itself reads
    assert_same(jax.jit(lambda i, u: scatter_grad(i, u, v))(wrapped, rows), want)


@pytest.mark.parametrize("d", [128, 72, 133])
@pytest.mark.parametrize("v", [300, 200_000])
def test_wide_rows_with_hot_duplicates(v, d):
    """Rows wide enough for the register-blocked sums (64 + 8-float chunks and a scalar tail),
    Zipf ids (one row takes a large share of the updates), the counting (small table) and the
    radix-sort (table much larger than the batch) grouping: XLA's bits, for the gradient and
    for the fused SGD update."""
    rng = np.random.default_rng(v + d)
    n = 2000
    ids = ((rng.zipf(1.1, n) - 1) % v).astype(np.int32)
    ids[::97] = v + 5  # dropped
    rows = mixed(rng, (n, d), np.float32)
    want = jax.jit(lambda i, u: jnp.zeros((v, d), jnp.float32).at[i].add(u, mode="drop"))(
        ids, rows)
    assert_same(jax.jit(lambda i, u: scatter_grad(i, u, v))(ids, rows), want)
    t = mixed(rng, (v, d), np.float32)
    s = np.float32(-0.03)
    got = jax.jit(sparse_sgd)(t, ids, rows, s)
    assert_same(got, jax.jit(lambda t, g: t + g * s)(t, want))


@pytest.mark.parametrize("strategy", ["scan", "grouped"])
@pytest.mark.parametrize("form", ["rows", "gathered", "masked"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_both_strategies_at_pool_sizes(monkeypatch, strategy, form, dtype):
    """Enough updates (n * d >= 2^20) for the scan to split the rows across the pool, and the
    grouped sums forced (what larger pools run), each in every operand form: XLA's bits."""
    monkeypatch.setenv("EMBER_XLA_SCATTER_GRAD", strategy)
    rng = np.random.default_rng(21)
    v, d, n, s = 3000, 72, 16000, 500
    ids = ((rng.zipf(1.2, n) - 1) % (v + 40) - 20).astype(np.int32)  # hot rows, some dropped
    wrapped = np.where(ids < 0, ids + v, ids)
    src = mixed(rng, (s if form != "rows" else n, d), dtype)
    rows = rng.integers(-3, s + 3, n).astype(np.int32)
    mask = rng.random(n) < 0.7

    def xla(i, src, r, m):
        u = jnp.asarray(src) if form == "rows" else jnp.asarray(src)[jnp.clip(r, 0, s - 1)]
        if form == "masked":
            u = jnp.where(m[:, None], u, jnp.zeros_like(u))
        return jnp.zeros((v, d), dtype).at[i].add(u, mode="drop")

    def ember(i, src, r, m):
        call = jax.ffi.ffi_call("ember.scatter_grad", jax.ShapeDtypeStruct((v, d), dtype))
        return call(i, src, *{"rows": (), "gathered": (r,), "masked": (r, m)}[form])

    assert_same(jax.jit(ember)(wrapped, src, rows, mask), jax.jit(xla)(ids, src, rows, mask))


def test_scatter_grad_s64_ids_and_all_out_of_range():
    with jax.enable_x64(True):
        ids = np.array([2**40, -1, 5, 5, 9], np.int64)
        rows = np.arange(10, dtype=np.float32).reshape(5, 2)
        got = np.asarray(jax.jit(lambda i, u: scatter_grad(i, u, 6))(ids, rows))
    want = np.zeros((6, 2), np.float32)
    want[5] = rows[2] + rows[3]
    assert_same(got, want)


def test_scatter_grad_rejects_bad_shapes():
    call = jax.ffi.ffi_call("ember.scatter_grad", jax.ShapeDtypeStruct((4, 3), jnp.float32))
    with pytest.raises(Exception, match="updates must be"):
        jax.jit(call)(np.zeros(5, np.int32), np.zeros((5, 2), np.float32))


def test_rsqrt_reproduces_xla_on_this_machine():
    x = probe_values(1 << 16, seed=3)
    assert_same(native_rsqrt(x), xla_rsqrt(x))


def sparse_sgd(table, ids, rows, scale, alias=True):
    """alias=False: the result is a separate buffer (the kernel copies the untouched rows)."""
    call = jax.ffi.ffi_call("ember.sparse_sgd", jax.ShapeDtypeStruct(table.shape, table.dtype),
                            input_output_aliases={0: 0} if alias else None)
    return call(table, ids, rows, scale)


def sparse_adagrad(table, acc, ids, rows, scale, eps, alias=True):
    shapes = (jax.ShapeDtypeStruct(table.shape, table.dtype),) * 2
    call = jax.ffi.ffi_call("ember.sparse_adagrad", shapes,
                            input_output_aliases={0: 0, 1: 1} if alias else None)
    return call(table, acc, ids, rows, scale, eps)


SCALES = [-0.1, -0.0, 0.0, 0.25, -np.inf, np.nan, -3e38]


@pytest.mark.parametrize("alias", [True, False])
@pytest.mark.parametrize("scale", SCALES)
def test_sparse_sgd_is_the_dense_update(scale, alias):
    rng = np.random.default_rng(1)
    v, d, n = 40, 7, 90
    table = mixed(rng, (v, d), np.float32)
    table[3] = -0.0  # an untouched -0 row stays -0 only when t + 0*s keeps it
    ids = rng.integers(5, v + 2, n).astype(np.int32)
    rows = mixed(rng, (n, d), np.float32)
    s = np.float32(scale)

    def dense(t, i, u, s):
        return t + jnp.zeros_like(t).at[i].add(u, mode="drop") * s

    want = jax.jit(dense)(table, ids, rows, s)
    assert_same(jax.jit(lambda *a: sparse_sgd(*a, alias=alias))(table, ids, rows, s), want)


@pytest.mark.parametrize("scale,eps", [(-0.1, 1e-7), (-0.0, 1e-7), (0.5, 1e-7), (-0.1, -1.0),
                                       (-0.1, 0.0), (np.nan, 1e-7)])
@pytest.mark.parametrize("alias", [True, False])
@needs_xla_rsqrt
def test_sparse_adagrad_is_optax_adagrad(scale, eps, alias):
    rng = np.random.default_rng(2)
    v, d, n = 30, 9, 70
    table = mixed(rng, (v, d), np.float32)
    acc = np.abs(mixed(rng, (v, d), np.float32))
    acc[0] = 0.0
    ids = rng.integers(0, v + 2, n).astype(np.int32)
    rows = mixed(rng, (n, d), np.float32)
    rows[0] = 0.0
    s, e = np.float32(scale), np.float32(eps)

    def dense(t, a, i, u, s, e):
        g = jnp.zeros_like(t).at[i].add(u, mode="drop")
        a = g * g + a
        upd = jnp.where(a > 0, jax.lax.rsqrt(a + e), 0.0) * g
        return t + upd * s, a

    want = jax.jit(dense)(table, acc, ids, rows, s, e)
    got = jax.jit(lambda *x: sparse_adagrad(*x, alias=alias))(table, acc, ids, rows, s, e)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])


def test_dense_formula_is_optax_adagrad():
    """The formula the test above checks is optax.adagrad's own (not a transcription): both
    compiled by XLA give the same bits."""
    rng = np.random.default_rng(4)
    t, g = mixed(rng, (6, 5), np.float32), mixed(rng, (6, 5), np.float32)
    opt = optax.adagrad(0.3, initial_accumulator_value=0.2, eps=1e-6)
    upd, st = jax.jit(opt.update)(g, opt.init(t), t)

    @jax.jit
    def mine(g, a0):
        a = g * g + a0
        return jnp.where(a > 0, jax.lax.rsqrt(a + np.float32(1e-6)), 0.0) * g * np.float32(-0.3), a

    want_upd, want_acc = mine(g, np.full_like(t, 0.2))
    assert_same(st[0].sum_of_squares, want_acc)
    assert_same(upd, want_upd)


def sparse_adagrad_keras(table, acc, ids, rows, lr, eps, alias=True):
    shapes = (jax.ShapeDtypeStruct(table.shape, table.dtype),) * 2
    call = jax.ffi.ffi_call("ember.sparse_adagrad_keras", shapes,
                            input_output_aliases={0: 0, 1: 1} if alias else None)
    return call(table, acc, ids, rows, lr, eps)


#: untouched accumulators the update with g = 0 changes: -0 (g * g + a is +0), zero with
#: eps = 0 (rsqrt(0) = inf, times +0 is NaN), negative, NaN
ODD_SLOTS = {"plain": None, "minus_zero": -0.0, "zero": 0.0, "negative": -2.0, "nan": np.nan}


@pytest.mark.parametrize("lr,eps", [(0.1, 1e-7), (0.0, 1e-7), (-0.0, 1e-7), (-0.1, 1e-7),
                                    (np.inf, 1e-7), (np.nan, 1e-7), (0.1, 0.0), (0.1, -1.0)])
@pytest.mark.parametrize("slot", sorted(ODD_SLOTS))
@pytest.mark.parametrize("alias", [True, False])
@needs_xla_rsqrt
def test_sparse_adagrad_keras_is_keras_adagrad(lr, eps, slot, alias):
    """t - (lr * g) / sqrt(g * g + a + eps) as XLA:CPU computes Keras 3's Adagrad, untouched
    rows included: left alone where the update keeps them, else updated with g = 0."""
    rng = np.random.default_rng(5)
    v, d, n = 30, 11, 60
    table = mixed(rng, (v, d), np.float32)
    table[7] = -0.0
    acc = np.abs(mixed(rng, (v, d), np.float32)) + np.float32(0.1)
    ids = rng.integers(0, v + 2, n).astype(np.int32)
    ids[ids == 7] = 8  # row 7 (and those below) untouched
    if ODD_SLOTS[slot] is not None:
        acc[7, 3] = ODD_SLOTS[slot]
    rows = mixed(rng, (n, d), np.float32)
    lr_, e = np.float32(lr), np.float32(eps)

    def dense(t, a, i, u, lr, e):
        g = jnp.zeros_like(t).at[i].add(u, mode="drop")
        a = a + g * g
        return t - (lr * g) / jnp.sqrt(a + e), a

    want = jax.jit(dense)(table, acc, ids, rows, lr_, e)
    got = jax.jit(lambda *x: sparse_adagrad_keras(*x, alias=alias))(table, acc, ids, rows,
                                                                      lr_, e)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_gathered_form_is_xla_gather_then_scatter(masked, dtype):
    """indices, source[S, D], source_rows [, mask]: update i is source[clamp(source_rows[i])]
    (XLA's row gather), or a zero row where mask[i] is false, as JAX's transpose of a segment
    sum builds it (select(in_bounds, gather(ct, seg), 0))."""
    rng = np.random.default_rng(12)
    v, s, d, n = 50, 9, 6, 200
    ids = rng.integers(-2, v + 2, n).astype(np.int32)
    src = mixed(rng, (s, d), dtype)
    rows = rng.integers(-3, s + 3, n).astype(np.int32)
    mask = rng.random(n) < 0.7

    def xla(i, src, r, m):
        u = jnp.asarray(src)[jnp.clip(r, 0, s - 1)]
        if masked:
            u = jnp.where(m[:, None], u, jnp.zeros_like(u))
        return jnp.zeros((v, d), dtype).at[i].add(u, mode="drop")

    def ember(i, src, r, m):
        call = jax.ffi.ffi_call("ember.scatter_grad", jax.ShapeDtypeStruct((v, d), dtype))
        return call(i, src, r, m) if masked else call(i, src, r)

    wrapped = np.where(ids < 0, ids + v, ids)
    assert_same(jax.jit(ember)(wrapped, src, rows, mask), jax.jit(xla)(ids, src, rows, mask))
    if dtype == jnp.float32:
        t = mixed(rng, (v, d), np.float32)
        sgd = jax.ffi.ffi_call("ember.sparse_sgd", jax.ShapeDtypeStruct((v, d), jnp.float32),
                               input_output_aliases={0: 0})
        extra = (rows, mask) if masked else (rows,)
        got = jax.jit(lambda t: sgd(t, wrapped, src, np.float32(-0.5), *extra))(t)
        want = jax.jit(lambda t: t + xla(ids, src, rows, mask) * np.float32(-0.5))(t)
        assert_same(got, want)


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_unaliased_update_of_a_table_in_fresh_pages(optimizer):
    """A result too large for the allocator to reuse heap memory (40 MB: mapped anew by every
    execution) has its pages mapped before the kernel writes it (fresh_pages.h): every row,
    touched or copied, is still XLA's."""
    rng = np.random.default_rng(21)
    v, d, n = 80_000, 128, 5000
    table = mixed(rng, (v, d), np.float32)
    ids = ((rng.zipf(1.1, n) - 1) % v).astype(np.int32)
    rows = mixed(rng, (n, d), np.float32)
    s = np.float32(-0.02)
    grad = jax.jit(lambda i, u: jnp.zeros((v, d), jnp.float32).at[i].add(u, mode="drop"))
    if optimizer == "sgd":
        got = jax.jit(lambda *a: sparse_sgd(*a, alias=False))(table, ids, rows, s)
        assert_same(got, jax.jit(lambda t, g: t + g * s)(table, grad(ids, rows)))
        return
    if not rsqrt_matches_xla():
        pytest.skip("the kernel's rsqrt is not XLA:CPU's on this CPU: the Adagrad kernel is "
                    "not used here")
    acc = np.abs(mixed(rng, (v, d), np.float32))
    e = np.float32(1e-7)

    def dense(t, a, g):
        a = g * g + a
        return t + jnp.where(a > 0, jax.lax.rsqrt(a + e), 0.0) * g * s, a

    got = jax.jit(lambda *x: sparse_adagrad(*x, alias=False))(table, acc, ids, rows, s, e)
    want = jax.jit(dense)(table, acc, grad(ids, rows))
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
