"""Lookups with ``jnp.take(..., mode="fill", fill_value=0)`` -- how ``jax.experimental.sparse``'s
BCOO product ``M @ T`` reads the dense operand -- times per-lookup weights, summed into
segments: one ``ember.segment_reduce`` with ``index_mode="zero"``, whose out-of-range lookups add
``0 * w`` (NaN for an Inf/NaN weight, as XLA's select-then-multiply gives), bit-equal with XLA
on ids outside the table and non-finite weights. A padded bag of such rows with weights not
provably finite stays in XLA with the reason."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

B, P, V, D = 8, 5, 30, 16


def _coo(rng, edge: bool):
    rows = np.repeat(np.arange(B), P)
    cols = rng.integers(0, V, B * P)
    data = rng.standard_normal(B * P).astype(np.float32)
    if edge:
        cols[:6] = [-1, V, V + 4, -V, -V - 1, 2 * V]       # wrapped, outside, far outside
        data[:3] = [np.inf, np.nan, -np.inf]                # 0 * Inf: NaN rows
        data[3] = -0.0
        rows[7] = B                                         # dropped by the scatter
    return data, np.stack([rows, cols], 1).astype(np.int32)


def _table(rng):
    t = rng.standard_normal((V, D)).astype(np.float32)
    t[0, :2] = [np.inf, np.nan]                             # a clamp would read these
    return t


def _bcoo_model():
    from jax.experimental import sparse

    def f(table, data, indices):
        return sparse.BCOO((data, indices), shape=(B, V)) @ table

    return f


def _check(f, make_args):
    rng = np.random.default_rng(0)
    module = from_jax(f, *make_args(rng, False)).module
    result = rewrite_module(module, cost_model=False)
    for edge in (False, True):
        args = make_args(np.random.default_rng(1 + edge), edge)
        for a, b in zip(run_module(result.module, args), run_module(module, args), strict=True):
            assert a.tobytes() == b.tobytes() or np.array_equal(a, b, equal_nan=True), (edge,)
    return result


def test_bcoo_matmul_is_a_zero_fill_weighted_segment_sum():
    result = _check(_bcoo_model(), lambda rng, edge: [_table(rng), *_coo(rng, edge)])
    (c,) = result.clusters
    assert c["kind"] == "segment_reduce"
    assert c["attributes"]["index_mode"] == "zero" and c["attributes"]["weighted"]
    assert not result.near_misses, result.near_misses


def test_take_fill_zero_times_weights_segment_sum():
    import jax
    import jax.numpy as jnp

    def f(t, i, w, s):
        rows = jnp.take(t, i, axis=0, mode="fill", fill_value=0) * w[:, None]
        return jax.ops.segment_sum(rows, s, num_segments=B)

    def make(rng, edge):
        data, idx = _coo(rng, edge)
        return [_table(rng), idx[:, 1], data, idx[:, 0]]

    result = _check(f, make)
    assert [c["attributes"]["index_mode"] for c in result.clusters] == ["zero"]


def test_zero_fill_padded_bag_with_weights_stays_in_xla():
    import jax.numpy as jnp

    def f(t, ids, w):
        return (jnp.take(t, ids, axis=0, mode="fill", fill_value=0) * w[..., None]).sum(1)

    def make(rng, edge):
        data, idx = _coo(rng, edge)
        return [_table(rng), idx[:, 1].reshape(B, P), data.reshape(B, P)]

    result = _check(f, make)
    assert not result.clusters
    assert any("zero-filled rows" in n["reason"] for n in result.near_misses), result.near_misses
