"""The compile cache of placement on DAE cores (``levels.lower_final``, used by
``placement/dae/workload.py``): clusters of one shape class share each variant's compiled
module, and what a cache hit returns prints exactly as ``lower_cluster``'s last stage of the
cluster itself (its own module name included); a different shape class is compiled anew."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae_target.passes.levels import lower_cluster, lower_final
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.ir.printer import print_module
from ember_xla.orchestrate.rewrite_model import rewrite_for_placement
from ember_xla.placement.dae.variants import VARIANTS


def _specs():
    def f(t1, t2, t3, i1, i2, i3, s1, s2, s3):
        return (jax.ops.segment_sum(jnp.take(t1, i1, axis=0), s1, num_segments=4),
                jax.ops.segment_sum(jnp.take(t2, i2, axis=0), s2, num_segments=4),
                jax.ops.segment_max(jnp.take(t3, i3, axis=0), s3, num_segments=4))

    z = np.zeros
    args = [z((30, 8), np.float32), z((50, 8), np.float32), z((20, 8), np.float32),
            z(7, np.int32), z(11, np.int32), z(5, np.int32),
            z(7, np.int32), z(11, np.int32), z(5, np.int32)]
    module = rewrite_for_placement(from_jax(f, *args).module).module
    return [cluster_spec(c) for c in ember_calls(module)]


def test_one_shape_class_compiles_once_and_hits_equal_a_fresh_compile():
    a, b, other = _specs()
    for variant, pipe in VARIANTS.items():
        cache: dict = {}
        got = [lower_final(s, pipe, cache=cache) for s in (a, b, other)]
        assert len(cache) == 2, variant          # a and b share one entry; max is its own
        for spec, m in zip((a, b, other), got, strict=True):
            want = lower_cluster(spec, pipe)[-1][1]
            assert print_module(m) == print_module(want), (variant, spec.name)
        assert got[0].name != got[1].name        # the hit carries its own module name
