"""The per-call cost decision (rewrites/call_plan.py): clusters that can share a grouped call are
planned together (one fixed cost), the report carries each decision and the predicted times
of grouped, separate and XLA; the grouped constants are the fit of the measurements stored
beside them. ~15 s (exports small JAX functions, runs two on XLA:CPU)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites import call_plan, profitability
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.compare import compare_outputs
from ember_xla.runtime.execute import run_module

CALIBRATE = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_cost_model.py"
# The 8-table DLRM-style stage of issue reports: B=256, D=16, tables of 10..50,000 rows.
ROWS = (50_000, 20_000, 10_000, 5_000, 1_000, 500, 100, 10)
POOLING = (20, 10, 5, 3, 2, 1, 1, 1)


def _stage(batch: int, dim: int, rows=ROWS, pooling=POOLING):
    k = len(rows)

    def f(*a):
        return jnp.concatenate([jax.ops.segment_sum(jnp.take(a[j], a[k + j], axis=0),
                                                    a[2 * k + j], num_segments=batch)
                                for j in range(k)], axis=1)

    rng = np.random.default_rng(0)
    args = ([rng.standard_normal((n, dim), dtype=np.float32) for n in rows]
            + [rng.integers(0, n, batch * p, dtype=np.int32)
               for n, p in zip(rows, pooling, strict=True)]
            + [np.repeat(np.arange(batch, dtype=np.int32), p) for p in pooling])
    return from_jax(f, *args).module, args


def _calibrate():
    spec = importlib.util.spec_from_file_location("calibrate_cost_model", CALIBRATE)
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    return cal


def test_grouped_model_is_a_measurement_and_its_fit():
    model = profitability.load_model()
    assert model["grouped_command"].startswith("python benchmarks/calibrate_cost_model.py")
    assert model["module_floor_s"]["value_s"] > 0
    grouped = model["grouped"]
    assert len(grouped["points"]) >= 12 and {p["k"] for p in grouped["points"]} >= {2, 8, 26}
    cal = _calibrate()
    single = model["families"]["segment_reduce/sum"]["ember"]
    for backend in ("ember", "separate"):
        coef, _ = cal.fit_grouped(grouped["points"], single, f"{backend}{model['fit_on']}")
        for got, key in zip(coef, ("c0_s", "per_table_s"), strict=True):
            assert math.isclose(got, grouped[backend][key], rel_tol=1e-6, abs_tol=1e-15)
        assert grouped[backend]["c0_s"] > 0
    coef, _ = cal.fit_k_tables(grouped["points"], f"xla{model['fit_on']}")
    for got, key in zip(coef, cal.K_TABLE_COEFFICIENTS, strict=True):
        assert math.isclose(got, grouped["xla"][key], rel_tol=1e-6, abs_tol=1e-15), key


def test_one_fixed_cost_for_the_group():
    """A grouped call's prediction holds one fixed cost however many tables it has, and
    grows with every table's work (each alternative's does)."""
    module, _ = _stage(batch=1, dim=16, pooling=(2,) * 8)
    clusters = rewrite_module(module, cost_model=False, group=False).clusters
    assert len(clusters) == 8
    from ember_xla.rewrites.matcher import find_clusters
    from ember_xla.rewrites.patterns import ALL_PATTERNS

    work = module.clone()
    found = find_clusters(work, list(ALL_PATTERNS)).clusters
    (cand,) = call_plan.candidate_groups(found)
    assert len(cand) == 8
    t8, t2 = call_plan.group_times(cand), call_plan.group_times(cand[:2])
    g = profitability.load_model()["grouped"]
    # one fixed cost: adding 6 tables adds their per-table and work terms, not a c0 each
    assert math.isclose(t8["grouped"] - t2["grouped"],
                        sum(call_plan._in_group(c, profitability.fitted_prediction(c), g)[0]
                            for c in cand[2:]), rel_tol=1e-9)
    assert t8["grouped"] > t2["grouped"] and t8["xla"] > t2["xla"]
    assert t8["separate_calls"] > t2["separate_calls"]


def test_eight_table_stage_is_one_grouped_call_with_both_predictions():
    module, args = _stage(batch=256, dim=16)
    result = rewrite_module(module, cost_model=True)
    (grp,) = result.groups
    assert grp["decision"] == "grouped" and len(grp["members"]) == 8 and grp["concatenated"]
    p = grp["predicted_us"]
    assert set(p) == {"grouped", "separate_calls", "xla"}
    assert p["grouped"] <= (1 - profitability.MARGIN) * p["xla"]
    assert p["grouped"] <= p["separate_calls"]
    assert all(c["decision"] == "grouped" and set(c["predicted_us"]) == {"ember", "xla"}
               for c in result.clusters)
    assert not any(n.get("kept_in_xla") for n in result.near_misses)
    assert compare_outputs(run_module(module, args),
                           run_module(result.module, args))["bitwise_equal"]


def test_without_grouping_each_cluster_is_judged_alone():
    module, _ = _stage(batch=256, dim=16)
    result = rewrite_module(module, cost_model=True, group=False)
    assert not result.groups
    kept = [n for n in result.near_misses if n.get("kept_in_xla")]
    assert all(n["decision"] == "xla" for n in kept)
    assert all(c["decision"] == "separate" for c in result.clusters)
    assert len(kept) + len(result.clusters) == 8
    for c in result.clusters:
        assert c["predicted_us"]["ember"] <= (1 - profitability.MARGIN) * c["predicted_us"]["xla"]


def test_tiny_group_follows_the_rule():
    """Two two-lookup tables at B=1: the plan's decision is the one its predicted times give
    (grouped only when >= 1.33x faster than XLA and no slower than separate calls)."""
    module, args = _stage(batch=1, dim=16, rows=(100, 50), pooling=(2, 2))
    result = rewrite_module(module, cost_model=True)
    from ember_xla.rewrites.matcher import find_clusters
    from ember_xla.rewrites.patterns import ALL_PATTERNS

    found = find_clusters(module.clone(), list(ALL_PATTERNS)).clusters
    t = call_plan.group_times(found)
    grouped = (t["grouped"] <= (1 - profitability.MARGIN) * t["xla"]
               and t["grouped"] <= t["separate_calls"])
    assert bool(result.groups) == grouped
    if not grouped:
        assert all(c["decision"] == "separate" for c in result.clusters)
    assert compare_outputs(run_module(module, args),
                           run_module(result.module, args))["bitwise_equal"]


def test_cost_model_off_groups_everything_without_predictions():
    module, _ = _stage(batch=1, dim=16, pooling=(2,) * 8)
    result = rewrite_module(module, cost_model=False)
    (grp,) = result.groups
    assert len(grp["members"]) == 8 and "predicted_us" not in grp and "decision" not in grp
