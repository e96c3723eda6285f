"""The per-cluster check: every ember custom-call of a rewritten module against its outlined
computation on the model's own operands. The library corpus and donated training steps with
fused optimizers (in-place updates) check exact; the probe's outputs pair each call with its
reference; a call inside a loop body is listed as unchecked; a call whose values differ is
named with the difference and where (the wrong-kernel case through the CLI is in
tests/cli/test_verify_verdict.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.hlo.printer import print_module
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.cluster_check import check_clusters, cluster_mismatch_line, probe_module

lm = load_helper("rewrites/library_models.py")


@pytest.mark.parametrize("name", sorted(lm.MODELS))
def test_library_models_clusters_equal_xla(name):
    m = lm.MODELS[name]
    result = rewrite_module(lm.export(name).module, cost_model=False,
                            assume_finite_tables=m.assume_finite_tables)
    check = check_clusters(result.module, {c: lm.inputs(name, c) for c in ("random", "edge")})
    assert bool(check["calls"]) == bool(m.clusters)
    assert check["exact"], check
    assert check["unchecked"] == []


def _training_models():
    for n in ("training_steps", "training_corpus", "training_flax", "training_jax",
              "training_keras", "training_idioms"):
        load_helper(f"rewrites/{n}.py")
    return load_helper("rewrites/training_models.py")


@pytest.mark.parametrize("name", ["flax_linen_bag_sum_sgd_donated",
                                  "jax_two_tables_rowwise_adagrad_fused",
                                  "equinox_embedding_weighted_bag_adagrad"])
def test_fused_training_steps_clusters_equal_xla(name):
    """Fused updates write their tables in place (output_to_operand_aliasing); the reference
    reads the same operands, which XLA copies first."""
    tm = _training_models()
    result = rewrite_module(tm.export(name)[0].module, cost_model=False)
    assert any(c.get("optimizer") for c in result.clusters)
    check = check_clusters(result.module,
                           {c: tm.inputs(name, c) for c in ("random", "edge", "oob")})
    assert check["exact"], check
    assert len(check["calls"]) >= 2


def _bags():
    t = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    ids = np.random.default_rng(1).integers(0, 50, (4, 6)).astype(np.int32)

    def f(t, i):
        return jnp.concatenate([t[i].sum(1), t[i].max(1)], 1)
    return from_jax(f, t, ids), [t, ids]


def test_probe_pairs_each_call_with_its_reference():
    model, args = _bags()
    result = rewrite_module(model.module, cost_model=False)
    before = print_module(result.module)
    probe, calls, unchecked = probe_module(result.module)
    assert print_module(result.module) == before  # the rewritten module is left as it was
    assert unchecked == [] and calls
    outs = probe.entry.root.operands
    assert len(outs) == 2 * sum(c.arrays for c in calls)
    assert outs[0].owner.opcode in ("custom-call", "get-tuple-element")
    assert "input_output_alias" not in probe.attributes
    check = check_clusters(result.module, {"a": args})
    assert check["exact"] and all(c["bitwise_equal"] for c in check["calls"])


def test_a_call_inside_a_loop_is_listed_unchecked():
    def f(t, ids):
        def body(c, i):
            return c + t[i].sum(1), None
        return jax.lax.scan(body, jnp.zeros((4, 8)), ids)[0]

    t = np.ones((50, 8), np.float32)
    ids = np.zeros((3, 4, 6), np.int32)
    result = rewrite_module(from_jax(f, t, ids).module, cost_model=False)
    assert result.clusters
    check = check_clusters(result.module, {"a": [t, ids]})
    assert check["calls"] == [] and len(check["unchecked"]) == 1
    assert check["unchecked"][0].startswith("ember_padded_bag (in ")


def test_mismatch_line_names_the_call_and_where():
    check = {"calls": [{"call": "ember_padded_bag", "target": "ember.padded_bag",
                        "exact": False, "bitwise_equal": False, "max_abs_diff": 2.5e-7,
                        "output": 0, "where": [3, 1], "case": "out_of_range",
                        "reference": 1.25}], "exact": False, "unchecked": []}
    line = cluster_mismatch_line(check)
    assert line == ("cluster ember_padded_bag (ember.padded_bag) differs from its outlined "
                    "computation on XLA:CPU by 2.5e-07 at index [3, 1] (out of range ids), "
                    "where XLA computes 1.25")


def test_probes_split_to_keep_within_the_run_budget(monkeypatch):
    """Each call's results come out twice: with EMBER_XLA_MAX_RUN_BYTES leaving room for one
    call's at a time, every call gets a probe of its own, and all are still checked."""
    from ember_xla.runtime.cluster_check import _parts

    model, args = _bags()
    result = rewrite_module(model.module, cost_model=False)
    assert len(_parts(result.module)) == 1
    inputs = sum(a.nbytes for a in args)
    monkeypatch.setenv("EMBER_XLA_MAX_RUN_BYTES", str(inputs + 300))  # one [4, 8] f32 pair
    parts = _parts(result.module)
    assert len(parts) == 2 and all(len(p) == 1 for p in parts)
    check = check_clusters(result.module, {"a": args})
    assert len(check["calls"]) == 2 and check["exact"]
