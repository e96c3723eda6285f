"""Graphs with nothing to rewrite come out unchanged (byte-identical), and near-misses carry
their reason."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.rewrites.pipeline import rewrite_module


def test_dense_model_is_left_alone():
    import jax.numpy as jnp

    def mlp(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2 + jnp.sort(x, axis=1)[:, :1]

    args = [np.ones((4, 8), np.float32), np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)]
    m = from_jax(mlp, *args).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters and r.module is m
    assert module_to_proto(r.module) == before


def test_gather_without_reduction_is_left_alone():
    import jax.numpy as jnp

    m = from_jax(lambda t, i: jnp.take(t, i, axis=0) * 2.0, np.ones((10, 4), np.float32),
                 np.zeros(3, np.int32)).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters and module_to_proto(r.module) == before


def test_escaping_rows_are_a_near_miss():
    import jax

    def f(t, i, s):
        rows = t[i]
        return jax.ops.segment_sum(rows, s, num_segments=3), rows.sum()

    m = from_jax(f, np.ones((10, 4), np.float32), np.zeros(5, np.int32),
                 np.zeros(5, np.int32)).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters
    assert any("also used outside the cluster" in n["reason"] for n in r.near_misses)
    assert module_to_proto(r.module) == before
    assert r.counters["ember.segment_reduce"]["failed"] >= 1


def test_shared_lookup_feeding_two_reductions_is_refused():
    import jax
    import jax.numpy as jnp

    def f(t, i, s):
        rows = jnp.take(t, i, axis=0, mode="clip")
        return (jax.ops.segment_sum(rows, s, num_segments=3),
                jax.ops.segment_max(rows, s, num_segments=3))

    m = from_jax(f, np.ones((10, 4), np.float32), np.zeros(5, np.int32),
                 np.zeros(5, np.int32)).module
    r = rewrite_module(m)
    assert not r.clusters
    assert len(r.near_misses) == 2
