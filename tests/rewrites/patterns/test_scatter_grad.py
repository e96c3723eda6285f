"""The backward of a lookup found in exported JAX gradients and rewritten to
``ember.scatter_grad``: every idiom's gradient bit-identical to XLA's (both excess-precision
settings), edge cases included, and the zero-initialised scatter-adds that are not lookup
gradients left alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.patterns import ScatterGrad
from ember_xla.rewrites.pipeline import rewrite_module

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

GRAD_ONLY = [ScatterGrad()]


def kinds(r, direction):
    return [c["kind"] for c in r.clusters if c["pass"] == direction]


@pytest.mark.parametrize("mode", [None, "clip", "fill"])
@pytest.mark.parametrize("lo,hi", [(0, 8), (-70, 70)])  # duplicates; out of range both ways
def test_take_bag(mode, lo, hi):
    rng = np.random.default_rng(hash((mode, lo)) % 2**32)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, lo, hi)
    r = ts.check_step(ts.grad_fn(ts.bag_take(w, mode)), t, ids, y)
    assert kinds(r, "backward") == ["scatter_grad"]
    assert kinds(r, "forward") == ["padded_bag"]
    (entry,) = ts.backward(r)
    assert entry["table"]["parameter_number"] == 0 and entry["table"]["rows"] == ts.V


def test_index_bag_wraps_and_clamps():
    rng = np.random.default_rng(1)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, -90, 90)
    r = ts.check_step(ts.grad_fn(ts.bag_index(w)), t, ids, y)
    assert kinds(r, "backward") == ["scatter_grad"]


def test_weighted_bag_gradient():
    rng = np.random.default_rng(2)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, 0, 10)
    wts = rng.standard_normal(ids.shape).astype(np.float32)
    # the backward alone: with the forward weighted padded_bag rewritten too, XLA's gradient
    # changes in the last bit (the forward kernel's pooled values are not XLA's there)
    r = ts.check_step(ts.grad_fn(ts.bag_weighted(w)), t, ids, wts, y, patterns=GRAD_ONLY)
    assert kinds(r, "backward") == ["scatter_grad"]


def test_segment_bag_with_empty_bags():
    rng = np.random.default_rng(3)
    w, t = ts.head(rng), ts.table(rng)
    ids = rng.integers(0, 12, 50).astype(np.int32)
    seg = np.sort(rng.integers(0, ts.B + 4, 50)).astype(np.int32)  # gaps: empty bags; some OOB
    y = rng.standard_normal(ts.B).astype(np.float32)
    r = ts.check_step(ts.grad_fn(ts.bag_segments(w, ts.B)), t, ids, seg, y)
    assert kinds(r, "backward") == ["scatter_grad"]
    assert kinds(r, "forward") == ["segment_reduce"]


def test_token_embedding_without_pooling():
    rng = np.random.default_rng(4)
    w, t = ts.head(rng), ts.table(rng)
    ids, _ = ts.batch(rng, 0, 20)
    y = rng.standard_normal(ids.shape).astype(np.float32)
    r = ts.check_step(ts.grad_fn(ts.tokens(w)), t, ids, y)
    assert kinds(r, "backward") == ["scatter_grad"]


def test_two_lookups_of_one_table():
    rng = np.random.default_rng(5)
    w, t = ts.head(rng), ts.table(rng)
    (a, y), (b, _) = ts.batch(rng, 0, 9), ts.batch(rng, 5, 14)

    def loss(table, a, b, y):
        return ts.mse(table[a].sum(1) + table[b].sum(1), w, y)

    r = ts.check_step(jax.value_and_grad(loss), t, a, b, y)
    assert kinds(r, "backward") == ["scatter_grad", "scatter_grad"]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_low_precision_tables(dtype):
    rng = np.random.default_rng(6)
    w = ts.head(rng).astype(dtype)
    t = ts.table(rng, dtype=dtype)
    ids, y = ts.batch(rng, 0, 7)
    r = ts.check_step(ts.grad_fn(ts.bag_index(w)), t, ids, y.astype(dtype), patterns=GRAD_ONLY)
    assert kinds(r, "backward") == ["scatter_grad"]


def test_integer_label_cross_entropy_is_not_a_lookup_gradient():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((ts.B, 10)).astype(np.float32)
    labels = rng.integers(0, 10, ts.B).astype(np.int32)

    def loss(logits, labels):
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    r = rewrite_module(from_jax(jax.grad(loss), logits, labels).module, patterns=GRAD_ONLY)
    assert not r.clusters


def test_degree_counting_is_not_a_lookup_gradient():
    rng = np.random.default_rng(8)
    receivers = rng.integers(0, 20, 64).astype(np.int32)

    def degree(receivers):
        return jax.ops.segment_sum(jnp.ones(receivers.shape, jnp.float32), receivers, 20)

    r = rewrite_module(from_jax(degree, receivers).module, patterns=GRAD_ONLY)
    assert not r.clusters


def test_scatter_into_a_nonzero_table_is_left_alone():
    rng = np.random.default_rng(9)
    t = ts.table(rng)
    ids, _ = ts.batch(rng, 0, 9)
    rows = rng.standard_normal((*ids.shape, ts.D)).astype(np.float32)

    def f(t, ids, rows):
        return t.at[ids].add(rows), t[ids]

    r = rewrite_module(from_jax(f, t, ids, rows).module, patterns=GRAD_ONLY)
    assert not r.clusters and r.counters["ember.scatter_grad"]["failed"] == 1


def test_zero_scatter_without_a_forward_lookup_is_reported():
    rng = np.random.default_rng(10)
    ids, _ = ts.batch(rng, 0, 9)
    rows = rng.standard_normal((*ids.shape, ts.D)).astype(np.float32)

    def f(ids, rows):  # message passing onto nodes: no lookup reads these ids
        return jnp.zeros((ts.V, ts.D), jnp.float32).at[ids].add(rows)

    r = rewrite_module(from_jax(f, ids, rows).module, patterns=GRAD_ONLY)
    assert not r.clusters
    assert any("not the gradient of a lookup" in n["reason"] for n in r.near_misses)


def test_messages_of_the_looked_up_table_are_a_segment_sum():
    """TF's GNN layer sums the messages ``x[src]`` at ``dst`` while it also reads ``x[dst]``
    (attention, EdgeConv): the scatter's ids are a lookup's, but its updates are rows of the
    very table, so it is the forward aggregation (``segment_reduce``), not a gradient."""
    import tensorflow as tf

    from ember_xla.hlo_import.tf_source import from_tf_function
    from ember_xla.runtime.execute import run_module

    rng = np.random.default_rng(11)
    x = rng.standard_normal((40, 8)).astype(np.float32)
    src, dst = (rng.integers(0, 40, 300).astype(np.int32) for _ in range(2))

    def layer(x, src, dst):
        return (tf.math.unsorted_segment_sum(tf.gather(x, src), dst, 40),
                tf.reduce_sum(tf.gather(x, dst), -1))

    m = from_tf_function(layer, x, src, dst).module
    r = rewrite_module(m, cost_model=False)
    assert kinds(r, "forward") == ["segment_reduce"] and kinds(r, "backward") == []
    want, got = run_module(m, [x, src, dst]), run_module(r.module, [x, src, dst])
    assert all(w.tobytes() == g.tobytes() for w, g in zip(want, got, strict=True))
