"""Placement on the cores of a DAE target (``placement/dae``, ``orchestrate/emulate_cores``):
the DLRM-style example (sorted segment ids: shareable by batch) placed by every policy and by a
plan file, emulated on tmu8, verified; the cost model against the emulator per core; bad plans
and inputs are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ember_xla.examples import dlrm
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.emulate_cores import emulate_on_cores, plan_for
from ember_xla.orchestrate.rewrite_model import rewrite_for_placement
from ember_xla.placement.dae.plan import BadPlan
from ember_xla.placement.dae.shares import ids_prefix, share, whole_only

TMU8 = load_target("tmu8")


@pytest.fixture(scope="module")
def model():
    params, batch = dlrm.make_params(), dlrm.make_batch(batch=256)
    args = dlrm.flat_args(params, batch)
    m = from_jax(dlrm.jax_entry, *args)
    return m.module, rewrite_for_placement(m.module).module, list(args)


@pytest.fixture(scope="module")
def auto_run(model):
    return emulate_on_cores(*model, TMU8, "auto")


def test_auto_places_every_cluster_and_verifies(auto_run):
    run = auto_run
    assert run.ok and run.verify["model"]["bitwise_equal"]
    assert len(run.works) == len(dlrm.ROWS)
    assert all(c["bitwise_equal"] for c in run.verify["clusters_vs_native"])
    assert any(c["pieces"] > 1 for c in run.verify["clusters_vs_native"])  # some were split
    assert all(w.whole_reason is None for w in run.works)


def test_predicted_per_core_within_15_percent_of_the_emulator(auto_run):
    for k, r in enumerate(auto_run.timing.cores):
        if r.cycles:
            assert abs(auto_run.plan.predicted[k] - r.cycles) <= 0.15 * r.cycles, k


@pytest.mark.parametrize("policy", ["symmetric", "greedy"])
def test_baselines_verify_and_auto_is_not_slower(model, auto_run, policy):
    run = emulate_on_cores(*model, TMU8, policy)
    assert run.ok and run.plan.policy == policy
    if policy == "greedy":
        assert all(p.start == 0 and p.stop == run.works[p.cluster].rows
                   for p in run.plan.pieces)
    assert auto_run.makespan <= run.makespan


def test_a_saved_plan_runs_the_same(model, auto_run, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(auto_run.plan.as_dict()))
    run = emulate_on_cores(*model, TMU8, str(path))
    assert run.ok and run.makespan == auto_run.makespan


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["pieces"].pop(), r"rows from \d+ are not covered"),
    (lambda d: d["pieces"][0].update(core=9), r"core 9 is not one of the 8 cores"),
    (lambda d: d["pieces"][0].update(variant="O9"), r"has no variant 'O9'"),
    (lambda d: d.update(cores=4), r"made for 4 cores, the target has 8"),
    (lambda d: d.update(format="x"), r"not a DAE placement plan"),
])
def test_bad_plans_are_one_line_errors(auto_run, tmp_path, edit, match):
    d = auto_run.plan.as_dict()
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BadPlan, match=match) as e:
        plan_for(TMU8, auto_run.works, str(path))
    assert "\n" not in str(e.value)


def test_segment_shares_sorted_or_not(auto_run):
    """A share holds the lookups of its segments in their order, sorted ids or not."""
    w = auto_run.works[0]
    seg = np.asarray(w.operands[2]).copy()
    assert whole_only(w.spec, w.operands) is None
    pre = ids_prefix(w.spec, w.operands)
    assert pre[0] == 0 and pre[-1] == len(seg) and np.all(np.diff(pre) >= 0)
    sh = share(w.spec, w.operands, 10, 20)
    assert len(sh.lookups) == pre[20] - pre[10] and sh.output_shapes[0][0] == 10
    order = np.random.default_rng(3).permutation(len(seg))
    shuffled = [w.operands[0], np.asarray(w.operands[1])[order], seg[order]]
    assert whole_only(w.spec, shuffled) is None
    assert np.array_equal(ids_prefix(w.spec, shuffled), pre)
    sh2 = share(w.spec, shuffled, 10, 20)
    keep = (seg[order] >= 10) & (seg[order] < 20)
    assert np.array_equal(sh2.operands[1], np.asarray(w.operands[1])[order][keep])
    assert np.array_equal(sh2.operands[2], seg[order][keep] - 10)


def test_memory_headroom_names_what_a_memory_variant_could_gain(auto_run):
    """On tmu8 every piece is execute-bound (headroom < 1: no variant that only changes how
    rows reach the core can shorten one); with DRAM 100x slower the same pieces are
    memory-bound (headroom > 1) and their predicted bound says so."""
    import dataclasses

    from ember_xla.placement.dae.cost import level_shares, memory_headroom, piece_cost

    run = auto_run
    loads = [(p.core, run.works[p.cluster].load(p.variant, p.start, p.stop))
             for p in run.plan.pieces]
    h = memory_headroom(TMU8, run.plan.cores, loads)
    assert 0 < h < 1
    assert all(piece_cost(TMU8, p, sh).bound == "execute"
               for (_, p), sh in zip(loads, level_shares(TMU8, run.plan.cores, loads),
                                     strict=True))
    slow = dataclasses.replace(TMU8, dram=dataclasses.replace(
        TMU8.dram, bandwidth_gb_per_s=TMU8.dram.bandwidth_gb_per_s / 100,
        latency_ns=TMU8.dram.latency_ns * 100))
    assert memory_headroom(slow, run.plan.cores, loads) > 1
