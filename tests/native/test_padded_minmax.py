"""ember.padded_bag's max/min orders (native/padded_minmax.h) called directly: the bags equal
XLA:CPU's own max/min reduce of the same rows byte for byte in the regime each order models
(reduce_loop below 4096 elements, ynn_groups4 from there on), also on the threaded path and for
D not a multiple of 8; empty bags give the init; unsupported uses are one clear error."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla import native

native.register_targets()

NANS = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFC00005], np.uint32).view(np.float32)


def _table(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    t = rng.standard_normal((n, d)).astype(np.float32)
    u = rng.random((n, d))
    t = np.where(u < 0.1, rng.choice(NANS, (n, d)), t)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, 1e-40, -1e-40], np.float32)
    return np.where((u >= 0.1) & (u < 0.4), rng.choice(special, (n, d)), t)


def _call(table, ids, combiner: str, order: str, init: float | None = None, dtype=np.float32):
    init = (-np.inf if combiner == "max" else np.inf) if init is None else init
    call = jax.ffi.ffi_call("ember.padded_bag",
                            jax.ShapeDtypeStruct((ids.shape[0], table.shape[1]), dtype))
    return np.asarray(call(table, ids, combiner=combiner, index_mode="clip", wrap_negative=False,
                           weighted=False, init=float(init), index_bits=np.int64(32),
                           sum_order=order, row_type=""))


@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize("b,p,d,order", [
    (3, 7, 13, "reduce_loop"), (2, 40, 21, "reduce_loop"), (64, 9, 13, "ynn_groups4"),
    (3000, 10, 24, "ynn_groups4"),
    # whole chunks of several vectors (128 floats in the AVX-512 clone, 32 in AVX2's), then
    # single vectors of 16 and 8 floats and single floats
    (1, 3, 128, "reduce_loop"), (1, 2, 1000, "reduce_loop"), (2, 5, 296, "reduce_loop"),
    (8, 9, 128, "ynn_groups4"), (16, 20, 296, "ynn_groups4"), (4, 13, 1000, "ynn_groups4"),
    # tiles of floor(32768 / D) rows (31 and 15 here): groups of 4 restart at each tile
    (3, 70, 1040, "ynn_groups4"), (2, 33, 2100, "ynn_groups4")])
def test_matches_xla_reduce_bytes(combiner, b, p, d, order):
    rng = np.random.default_rng(b + p + d)
    n = 200
    table = _table(n, d, rng)
    ids = rng.integers(0, n, (b, p)).astype(np.int32)
    want = np.asarray(jax.jit(lambda r: r.max(1) if combiner == "max" else r.min(1))(table[ids]))
    got = _call(table, ids, combiner, order)
    assert (b * p * d >= 4096) == (order == "ynn_groups4")  # the regime XLA:CPU picked
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("order", ["reduce_loop", "ynn_groups4"])
def test_empty_bags_give_the_init(order):
    got = _call(np.ones((5, 3), np.float32), np.zeros((2, 0), np.int32), "max", order)
    assert np.array_equal(got, np.full((2, 3), -np.inf, np.float32))


@pytest.mark.parametrize("combiner,dtype,match", [
    ("sum", np.float32, "for max/min bags"),
    ("max", jnp.bfloat16, "need an f32 table and result"),
])
def test_unsupported_use_is_one_clear_error(combiner, dtype, match):
    table = jnp.ones((5, 3), dtype)
    with pytest.raises(Exception, match=match):
        _call(table, np.zeros((2, 4), np.int32), combiner, "ynn_groups4", init=0.0, dtype=dtype)


@pytest.mark.parametrize("order", ["reduce_loop", "ynn_groups4"])
def test_rows_of_no_values_and_no_bags(order):
    assert _call(np.ones((5, 0), np.float32), np.zeros((2, 3), np.int32), "min", order).shape \
        == (2, 0)
    assert _call(np.ones((5, 3), np.float32), np.zeros((0, 3), np.int32), "max", order).shape \
        == (0, 3)
