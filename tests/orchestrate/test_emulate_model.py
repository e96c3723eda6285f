"""A whole model with its clusters emulated (``emulator/run_model.py``) and
``ember_xla.jit(mode="emulate")``: outputs verified against the original module, one report
entry per cluster, refusals and misfits reported with their reason. Cost: ~20 s."""

from __future__ import annotations

import dataclasses as dc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember_xla
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.compile_clusters import DoesNotFit
from ember_xla.orchestrate.emulate_model import ClusterRefused, EmulateOptions, emulate_module
from ember_xla.rewrites.pipeline import rewrite_module

TMU, TINY = load_target("tmu"), load_target("tiny")


def two_bags(t, i, s, u, j):
    a = jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=6)
    b = jax.ops.segment_max(jnp.take(u, j, axis=0, mode="clip"), j % 3, num_segments=3)
    return jnp.tanh(a).sum() + b.sum(), a


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((40, 16)).astype(np.float32),
            rng.integers(-45, 45, 30).astype(np.int32), rng.integers(-1, 7, 30).astype(np.int32),
            rng.standard_normal((20, 8)).astype(np.float32),
            rng.integers(0, 20, 12).astype(np.int32)]


@pytest.fixture(scope="module")
def model():
    m = from_jax(two_bags, *inputs())
    return m, rewrite_module(m.module, cost_model=False).module


@pytest.mark.parametrize("engine", ["python", "xla"])
@pytest.mark.parametrize("level", [0, 3])
def test_model_emulated_and_verified(model, level, engine, tmp_path):
    original, rewritten = model
    trace = tmp_path / "t.json"
    em = emulate_module(original.module, rewritten, inputs(1),
                        EmulateOptions(TMU, level, engine=engine, trace_path=str(trace)))
    assert em.ok, em.report.verify
    assert em.report.engine == {"python": "Python reference", "xla": "C++ in XLA"}[engine]
    checks = em.report.verify["clusters_vs_native"]
    assert len(checks) == 2 and all(c["bitwise_equal"] for c in checks)
    if engine == "xla":   # the trace re-ran the Python reference: same cycles
        assert all(c["cpp_cycles_equal"] for c in checks)
    want = jax.jit(two_bags)(*inputs(1))
    for w, g in zip(want, em.outputs, strict=True):
        np.testing.assert_array_equal(np.asarray(w), g)
    d = em.report.as_dict()
    assert len(d["clusters"]) == 2 and all(c["emulated"] for c in d["clusters"])
    assert d["total_cycles"] == sum(c["cycles"] for c in d["clusters"]) > 0
    assert d["level"] == f"O{level}" and em.report.trace_events > 0 and trace.stat().st_size


def test_levels_change_cycles_not_outputs_and_engines_agree(model):
    original, rewritten = model
    cyc = {}
    for lv in (0, 3):
        for engine in ("python", "xla"):
            em = emulate_module(original.module, rewritten, inputs(2),
                                EmulateOptions(TMU, lv, engine=engine))
            assert em.ok
            cyc[lv, engine] = [c.timing.cycles for c in em.report.clusters]
        assert cyc[lv, "python"] == cyc[lv, "xla"]
    assert sum(cyc[3, "xla"]) < sum(cyc[0, "xla"])


def test_program_that_does_not_fit_names_cluster_and_reason(model):
    original, rewritten = model
    small = dc.replace(TMU, access=dc.replace(TMU.access, data_queue_bytes=4))
    with pytest.raises(DoesNotFit, match=r"cluster 0 \(%.*\): its DAE program does not fit"):
        emulate_module(original.module, rewritten, inputs(), EmulateOptions(small, 3))


def test_refused_cluster_is_an_error_or_reported(model, monkeypatch):
    from ember_xla import call_specs as cluster

    original, rewritten = model
    real = cluster.cluster_spec

    def refuse_max(call):
        spec = real(call)
        if spec.combiner == "max":
            raise cluster.LoweringRefused("test: max refused")
        return spec

    monkeypatch.setattr(cluster, "cluster_spec", refuse_max)
    with pytest.raises(ClusterRefused, match=r"cluster 1 .*refused it: test: max refused"):
        emulate_module(original.module, rewritten, inputs(), EmulateOptions(TMU, 3))
    em = emulate_module(original.module, rewritten, inputs(),
                        EmulateOptions(TMU, 3, engine="python", native_fallback=True))
    assert em.ok
    c1 = em.report.as_dict()["clusters"][1]
    assert c1 == {"index": 1, "custom_call": c1["custom_call"], "kind": "ember.segment_reduce",
                  "pass": "forward", "emulated": False, "refused": "test: max refused"}
    assert "ran on the native kernel, not emulated: test: max refused" in em.report.table()


def test_jit_emulate_mode():
    f = ember_xla.jit(two_bags, mode="emulate", target="tmu", level=3)
    out = f(*inputs(3))
    want = jax.jit(two_bags)(*inputs(3))
    for w, g in zip(want, out, strict=True):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(g))
    assert f.last_report.total_cycles > 0 and len(f.last_report.clusters) == 2
    with pytest.raises(ValueError, match="mode="):
        ember_xla.jit(two_bags, mode="fast")


def test_jit_emulate_mode_with_static_and_unused_arguments():
    def bag(t, i, s, n, unused):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=n)

    t, i, s = inputs(4)[:3]
    extra = np.ones(3, np.float32)  # pruned by jax: not a parameter of the module
    got = ember_xla.jit(bag, mode="emulate", static_argnums=3)(t, i, s, 6, extra)
    want = jax.jit(bag, static_argnums=3)(t, i, s, 6, extra)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
