"""``ember.ordered_scatter`` against XLA:CPU's own scatter of whole rows into a variable
(``t.at[ids].subtract(u)`` / ``.add(u)``, the scatter a TF/Keras sparse apply becomes), bit for
bit under both excess-precision settings: duplicate ids applied one by one in index order
(many of them on one row, so the parallel split over rows matters), ids past either end
dropped, an empty batch, NaN/Inf/-0 updates, s32 and s64 ids, the result aliased with the
operand (jax donation) or not; both strategies (few updates for the rows: grouped by row;
many, n >= V / 8: row ranges scanning the ids in order). Bad operands and attributes give one
clear error."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)


def ordered_scatter(t, ids, u, combiner):
    call = jax.ffi.ffi_call("ember.ordered_scatter", jax.ShapeDtypeStruct(t.shape, t.dtype),
                            input_output_aliases={0: 0})
    return call(t, ids, u, combiner=combiner)


def xla(t, ids, u, combiner):
    at = t.at[ids]
    return (at.subtract if combiner == "subtract" else at.add)(u, mode="drop")


def rows(rng, shape):
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 21, (shape[0], 1)))).astype(
        np.float32)


@pytest.mark.parametrize("excess", [True, False])
@pytest.mark.parametrize("combiner", ["subtract", "add"])
@pytest.mark.parametrize("v,n,d,hot", [(20, 24, 8, 0), (7, 3000, 5, 0), (1000, 5000, 16, 2000),
                                       (100_000, 64, 128, 0), (5, 0, 4, 0), (3, 40, 1, 0),
                                       (10_000, 1000, 8, 500)])
def test_ordered_scatter_is_xla_scatter(combiner, v, n, d, hot, excess):
    rng = np.random.default_rng(v + n + d + hot)
    t = rows(rng, (v, d))
    # past the end, and -v - 1 (jnp wraps it to -1): dropped by both; no id jnp would wrap
    ids = rng.integers(0, v + 3, n).astype(np.int32)
    ids[:hot] = 1                                   # one hot row: many updates in order
    ids[hot:hot + 2] = -v - 1
    u = rows(rng, (n, d))
    if n > 4:
        u[0, 0], u[1, -1], u[2, 0] = np.nan, np.inf, -0.0
    wrapped = ids
    opts = {"xla_allow_excess_precision": excess}
    want = jax.jit(lambda a, i, b: xla(a, i, b, combiner)).lower(t, wrapped, u).compile(
        compiler_options=opts)(t, wrapped, u)
    ours = jax.jit(lambda a, i, b: ordered_scatter(a, i, b, combiner)).lower(
        t, wrapped, u).compile(compiler_options=opts)
    got = ours(t, wrapped, u)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert (np.where(np.isnan(got), 0, got).view(np.uint32)
            == np.where(np.isnan(want), 0, want).view(np.uint32)).all()


def test_s64_ids_and_a_donated_operand():
    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(1)
        t, u = rows(rng, (50, 8)), rows(rng, (400, 8))
        ids = rng.integers(-5, 55, 400).astype(np.int64)
        want = np.asarray(jax.jit(lambda a, i, b: xla(a, i, b, "subtract"))(t, ids, u))
        f = jax.jit(lambda a, i, b: ordered_scatter(a, i, b, "subtract"), donate_argnums=0)
        # jnp wraps the negative ids before its scatter; the kernel drops them like XLA's
        # scatter itself, so compare on the wrapped ids
        wrapped = np.where(ids < 0, ids + 50, ids)
        got = np.asarray(f(jnp.asarray(t), wrapped, u))
        assert got.tobytes() == want.tobytes()
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("what,args,message", [
    ("combiner", (np.zeros((4, 2), np.float32), np.zeros(3, np.int32),
                  np.zeros((3, 2), np.float32), "multiply"), "combiner must be add or subtract"),
    ("width", (np.zeros((4, 2), np.float32), np.zeros(3, np.int32),
               np.zeros((3, 5), np.float32), "add"), "updates must be [L, D]"),
    ("dtype", (np.zeros((4, 2), np.float16), np.zeros(3, np.int32),
               np.zeros((3, 2), np.float16), "add"), "must be f32"),
    ("ids", (np.zeros((4, 2), np.float32), np.zeros(3, np.float32),
             np.zeros((3, 2), np.float32), "add"), "indices must be s32 or s64"),
])
def test_bad_operands_are_one_clear_error(what, args, message):
    with pytest.raises(Exception) as e:
        jax.block_until_ready(jax.jit(lambda a, i, b: ordered_scatter(a, i, b, args[3]))(
            *args[:3]))
    assert message in str(e.value) and "ember.ordered_scatter" in str(e.value), what
