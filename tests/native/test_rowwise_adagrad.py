"""``ember.sparse_rowwise_adagrad`` against the dense rowwise Adagrad XLA:CPU computes from the
scatter-add gradient (``a + mean(g * g, axis=1)``, ``t - lr * g / (sqrt(a) + eps)``), bit for
bit, with the result aliased to the operands (a donated table) and not (the kernel copies the
untouched rows); learning rates, epsilons and accumulators for which rows without gradient
change; and a clear error for a D or a sum_order the kernel does not take (the row-wise
mean's order against XLA's: test_row_mean_order.py)."""

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

from ember_xla.native.row_mean_order import OrderNotReproduced, row_mean_order  # noqa: E402

V, D, N = 400, 32, 300  # V * D >= 4096: XLA:CPU reduces the rows with YNNPACK


def rowwise(table, acc, ids, rows, lr, eps, alias=True, folded=False):
    shapes = (
        jax.ShapeDtypeStruct(table.shape, table.dtype),
        jax.ShapeDtypeStruct(acc.shape, acc.dtype),
    )
    call = jax.ffi.ffi_call(
        "ember.sparse_rowwise_adagrad", shapes, input_output_aliases={0: 0, 1: 1} if alias else None
    )
    return call(table, acc, ids, rows, lr, eps, lr_folded=folded, sum_order="blocked16")


def dense(t, a, i, u, lr, eps):
    g = jnp.zeros_like(t).at[i].add(u, mode="drop")
    a = a + jnp.mean(g * g, axis=1)
    return t - lr * g / (jnp.sqrt(a)[:, None] + eps), a


def inputs(seed=1):
    rng = np.random.default_rng(seed)
    table = (rng.standard_normal((V, D)) * np.exp2(rng.integers(-10, 11, (V, D)))).astype(
        np.float32
    )
    table[3] = -0.0
    acc = rng.uniform(0, 3, V).astype(np.float32)
    acc[:6] = [0.0, -0.0, np.nan, np.inf, -1.0, 1e-30]
    ids = rng.integers(6, V + 3, N).astype(np.int32)  # rows 0-5 untouched; some dropped
    ids[:5] = 7  # a hot duplicate
    rows = (rng.standard_normal((N, D)) * np.exp2(rng.integers(-20, 21, (N, 1)))).astype(np.float32)
    return table, acc, ids, rows


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    na, nb = np.isnan(a), np.isnan(b)
    return bool(
        np.array_equal(na, nb)
        and np.array_equal(np.where(na, 0, a.view(np.uint32)), np.where(nb, 0, b.view(np.uint32)))
    )


def _has_order(v: int, d: int) -> bool:
    try:
        return row_mean_order(v, d) == "blocked16"
    except OrderNotReproduced:
        return False


needs_order = pytest.mark.skipif(
    not _has_order(V, D),
    reason=("the kernel's row-wise mean is not XLA:CPU's on this CPU (native/row_mean_order.py)"),
)


@needs_order
@pytest.mark.parametrize("alias", [True, False])
@pytest.mark.parametrize(
    "lr,eps",
    [
        (0.05, 1e-8),
        (0.0, 1e-8),
        (-0.05, 1e-8),
        (0.05, 0.0),
        (np.inf, 1e-8),
        (np.nan, 1e-8),
        (0.05, -1.0),
        # the edge of the untouched-row check by sign bit alone:
        # the smallest normal eps (taken), a subnormal one (not)
        (0.05, 1.1754944e-38),
        (0.05, 1e-45),
    ],
)
def test_is_the_dense_update(lr, eps, alias):
    # a runtime lr: XLA computes t - (lr * g) * (1 / (sqrt(a) + eps)), contracted
    table, acc, ids, rows = inputs()
    lr, eps = np.float32(lr), np.float32(eps)
    want = jax.jit(dense)(table, acc, ids, rows, lr, eps)
    got = jax.jit(lambda *x: rowwise(*x, alias=alias))(table, acc, ids, rows, lr, eps)
    assert same_bits(got[0], want[0]) and same_bits(got[1], want[1])


@needs_order
@pytest.mark.parametrize("alias", [True, False])
@pytest.mark.parametrize("lr,eps", [(0.05, 1e-8), (3e38, 1e-8), (0.0, 0.0)])
def test_constant_lr_is_folded_as_xla_folds_it(lr, eps, alias):
    # a constant lr: XLA multiplies it into the per-row reciprocal, t - g * (r * lr)
    table, acc, ids, rows = inputs(2)
    want = jax.jit(lambda *x: dense(*x, lr, eps))(table, acc, ids, rows)
    got = jax.jit(
        lambda *x: rowwise(*x, np.float32(lr), np.float32(eps), alias=alias, folded=True)
    )(table, acc, ids, rows)
    assert same_bits(got[0], want[0]) and same_bits(got[1], want[1])


def test_bad_width_is_one_clear_error():
    table, acc = np.zeros((V, 8), np.float32), np.zeros(V, np.float32)
    ids, rows = np.zeros(4, np.int32), np.ones((4, 8), np.float32)
    with pytest.raises(
        Exception, match="D must be a multiple of 16 for sum_order blocked16, got 8"
    ):
        jax.jit(rowwise)(table, acc, ids, rows, np.float32(0.1), np.float32(1e-8))


def test_bad_accumulator_shape_is_one_clear_error():
    table, acc = np.zeros((V, D), np.float32), np.zeros((V, D), np.float32)
    ids, rows = np.zeros(4, np.int32), np.ones((4, D), np.float32)
    with pytest.raises(Exception, match=r"its slot and results \[V\]"):
        jax.jit(rowwise)(table, acc, ids, rows, np.float32(0.1), np.float32(1e-8))


def test_unknown_sum_order_is_one_clear_error():
    table, acc, ids, rows = inputs()
    call = jax.ffi.ffi_call(
        "ember.sparse_rowwise_adagrad",
        (
            jax.ShapeDtypeStruct(table.shape, table.dtype),
            jax.ShapeDtypeStruct(acc.shape, acc.dtype),
        ),
    )
    with pytest.raises(Exception, match="unknown sum_order tree7"):
        jax.jit(lambda *x: call(*x, lr_folded=False, sum_order="tree7"))(
            table, acc, ids, rows, np.float32(0.1), np.float32(1e-8)
        )
