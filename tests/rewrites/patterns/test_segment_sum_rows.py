"""Segment sums of rows XLA computes -- a GNN's MLP messages per receiver, a mixture of
experts' weighted combine, in inference and inside a training step -- become forward
``ember.scatter_grad`` clusters, bit-identical to XLA:CPU (both excess-precision settings;
duplicate, negative and out-of-range segment ids included); a segment sum of looked-up rows
stays ``ember.segment_reduce``'s and a lookup's gradient stays a backward cluster."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import training_steps as ts

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

V, E, D = 60, 400, 24


def _graph(rng, edge=False):
    x = rng.standard_normal((V, D)).astype(np.float32)
    w = (rng.standard_normal((2 * D, D)) * 0.3).astype(np.float32)
    s = rng.integers(0, V, E).astype(np.int32)
    r = rng.integers(0, V, E).astype(np.int32)
    r[:5] = r[5]                                      # one receiver many times
    if edge:
        r[10:14] = [-1, V, V + 7, -V - 3]             # dropped by the scatter
    return x, w, s, r


def _messages(x, w, s, r):
    return jax.nn.relu(jnp.concatenate([x[s], x[jnp.clip(r, 0, V - 1)]], 1) @ w)


def _mlp_sum(x, w, s, r):
    return jax.ops.segment_sum(_messages(x, w, s, r), r, num_segments=V)


def _forward(r):
    return [(c["kind"], c["pass"]) for c in r.clusters]


@pytest.mark.parametrize("edge", [False, True])
def test_mlp_messages_summed_per_receiver(edge):
    r = ts.check_step(_mlp_sum, *_graph(np.random.default_rng(1), edge))
    assert _forward(r) == [("scatter_grad", "forward")]
    (c,) = r.clusters
    assert c["table"]["rows"] == E and c["table"]["dim"] == D           # the summed rows


def test_weighted_combine_and_bf16():
    rng = np.random.default_rng(2)
    x, w, s, r = _graph(rng)
    g = rng.random(E).astype(np.float32)

    def combine(x, w, s, r, g):  # a mixture of experts' gate-weighted combine
        return jax.ops.segment_sum(_messages(x, w, s, r) * g[:, None], r, num_segments=V)

    assert _forward(ts.check_step(combine, x, w, s, r, g)) == [("scatter_grad", "forward")]
    xb, wb = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    assert _forward(ts.check_step(_mlp_sum, xb, wb, s, r)) == [("scatter_grad", "forward")]


def test_inside_a_training_step():
    """The segment sum's transpose gathers the cotangent by the same ids: still a forward sum."""
    x, w, s, r = _graph(np.random.default_rng(3), edge=True)

    def step(w, x, s, r):
        loss, g = jax.value_and_grad(lambda w: (jnp.tanh(_mlp_sum(x, w, s, r)) ** 2).mean())(w)
        return loss, w - 0.1 * g

    assert ("scatter_grad", "forward") in _forward(ts.check_step(step, w, x, s, r))


def test_looked_up_rows_and_gradients_keep_their_patterns():
    x, w, s, r = _graph(np.random.default_rng(4))
    res = ts.check_step(lambda x, s, r: jax.ops.segment_sum(x[s], r, num_segments=V), x, s, r)
    assert _forward(res) == [("segment_reduce", "forward")]

    def grad(x, s, g):
        return x[s].sum(0), jax.vjp(lambda x: x[s], x)[1](g)[0]

    g = np.random.default_rng(5).standard_normal((E, D)).astype(np.float32)
    assert ("scatter_grad", "backward") in _forward(ts.check_step(grad, x, s, g))
