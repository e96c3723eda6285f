"""``jax.grad`` through ``ember_xla.embedding_bag`` (eager and under ``jax.jit``) equals XLA's
gradient of the equivalent ``jnp.take`` + ``segment_sum`` (+ weights, / count) bit for bit: table
and weight gradients, for offsets and segment ids, clip and fill, wrapped negative ids,
duplicates, out-of-range ids and segment ids, empty bags, f32 and bf16 tables."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember_xla

N, D = 12, 8
IDS = np.array([3, 3, -1, 11, 0, 12, -13, 5, 5, 5, 7, 2], np.int32)   # dups, OOB, negative
OFFSETS = np.array([0, 3, 3, 8, 12], np.int32)                        # bag 1 is empty
SEGMENTS = np.array([0, 0, 2, 2, -1, 1, 1, 4, 0, 2, 2, 3], np.int32)  # -1 and 4 are dropped


def _reference(table, weights, *, bags, rows, combiner, mode, wrap):
    """The same bag in jnp ops (what a user would write without ember)."""
    n = table.shape[0]
    i = jnp.where(IDS < 0, IDS + n, IDS) if wrap else jnp.asarray(IDS)
    i = jnp.clip(i, 0, n - 1) if mode == "clip" else jnp.where((i < 0) | (i >= n), n, i)
    looked = jnp.take(table, i, axis=0, mode="fill" if mode == "fill" else "clip")
    if weights is not None:
        looked = looked * weights[:, None]
    bags = jnp.where((bags < 0) | (bags >= rows), rows, bags)
    total = jax.ops.segment_sum(looked, bags, num_segments=rows)
    if combiner == "sum":
        return total
    count = jnp.maximum(jax.ops.segment_sum(jnp.ones(bags.shape, table.dtype), bags,
                                            num_segments=rows), 1)[:, None]
    return total / (count if combiner == "mean" else jnp.sqrt(count))


def _bag_of_offsets():
    pos = np.arange(len(IDS))
    bag = np.searchsorted(OFFSETS, pos, side="right") - 1
    return np.where((pos >= OFFSETS[0]) & (pos < OFFSETS[-1]), bag, len(OFFSETS) - 1)


def _grads(fn, table, weights, cot, jit):
    def loss(t, w):
        return (fn(t, w).astype(jnp.float32) * cot).sum()
    g = jax.grad(loss, argnums=(0, 1) if weights is not None else 0)
    g = jax.jit(g) if jit else g
    out = g(table, weights)
    return [np.asarray(x) for x in (out if weights is not None else (out,))]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("mode, wrap", [("clip", False), ("clip", True), ("fill", True),
                                        ("fill", False)])
@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrt_n"])
@pytest.mark.parametrize("bounds", ["offsets", "segment_ids"])
def test_grad_equals_xla_gradient_of_the_jnp_bag(bounds, combiner, mode, wrap, weighted, dtype,
                                                 jit):
    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.standard_normal((N, D)).astype(np.float32), dtype)
    weights = (jnp.asarray(rng.random(len(IDS)).astype(np.float32), dtype) if weighted
               else None)
    if bounds == "offsets":
        rows, kw, bags = len(OFFSETS) - 1, {"offsets": OFFSETS}, _bag_of_offsets()
    else:
        rows, bags = 4, SEGMENTS
        kw = {"segment_ids": SEGMENTS, "num_segments": rows}
    cot = jnp.asarray(rng.standard_normal((rows, D)).astype(np.float32))

    def ours(t, w):
        return ember_xla.embedding_bag(t, IDS, combiner=combiner, mode=mode,
                                       wrap_negative=wrap, weights=w, **kw)

    def ref(t, w):
        return _reference(t, w, bags=jnp.asarray(bags), rows=rows, combiner=combiner,
                          mode=mode, wrap=wrap)

    got, want = _grads(ours, table, weights, cot, jit), _grads(ref, table, weights, cot, jit)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes(), (a, b)
    assert np.any(np.asarray(got[0], np.float32) != 0)          # the test is not vacuous


def test_grad_of_max_bag_is_refused_with_a_reason():
    table = jnp.ones((N, D), jnp.float32)
    with pytest.raises(ValueError, match="combiner='max'.*no gradient"):
        jax.grad(lambda t: ember_xla.embedding_bag(t, IDS % N, OFFSETS, combiner="max").sum())(
            table)


def test_sgd_step_through_embedding_bag_under_jit():
    """A training step (value_and_grad + SGD) through ember_xla.embedding_bag runs under
    jax.jit and updates exactly the rows the bags read."""
    table = jnp.asarray(np.random.default_rng(1).standard_normal((N, D)).astype(np.float32))
    ids = IDS % N

    @jax.jit
    def step(t):
        loss, g = jax.value_and_grad(
            lambda t: (ember_xla.embedding_bag(t, ids, OFFSETS) ** 2).sum())(t)
        return t - 0.1 * g, loss

    new, _ = step(table)
    touched = np.any(np.asarray(new) != np.asarray(table), axis=1)
    assert set(np.flatnonzero(touched)) == set(ids.tolist())
