"""The coverage audit: a gather whose rows reach a reduction no pattern roots at (here a
reduce-window, and a scatter inside an optimized module's fusion) is reported, not skipped;
a gather that reaches no reduction is not."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.coverage import lookup_reductions
from ember_xla.rewrites.pipeline import rewrite_module


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((10, 4)).astype(np.float32), np.array([1, 5, 2, 9], np.int32)]


def test_reduce_window_over_rows_is_reported():
    import jax

    def f(t, i):
        return jax.lax.reduce_window(t[i], 0.0, jax.lax.add, (2, 1), (1, 1), "VALID")

    m = from_jax(f, *_args()).module
    assert [r.opcode for _, r in lookup_reductions(m)] == ["reduce-window"]
    r = rewrite_module(m)
    assert not r.clusters
    assert [n["pattern"] for n in r.near_misses] == ["coverage"]
    assert "reduce-window" in r.near_misses[0]["reason"]


def test_optimized_fusion_scatter_is_reported():
    import jax

    from ember_xla.hlo_import.proto import module_from_proto

    def f(t, i, s):
        return jax.ops.segment_sum(t[i], s, num_segments=3)

    args = _args() + [np.array([0, 2, 2, 1], np.int32)]
    compiled = jax.jit(f).lower(*args).compile()
    proto = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    r = rewrite_module(module_from_proto(proto, "opt"))
    assert r.near_misses and all(n["reason"] for n in r.near_misses)


def test_gather_without_reduction_is_not_a_miss():
    m = from_jax(lambda t, i: t[i] * 2.0, *_args()).module
    assert lookup_reductions(m) == []
    assert rewrite_module(m).near_misses == []
