"""The profitability step: clusters the measured cost model predicts faster in XLA stay there
(reported as near-misses with both predicted times); the model's constants are the fit of the
measurements stored beside them. ~10 s (exports four tiny JAX functions, runs one on XLA:CPU).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites import measured_grid, profitability
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.compare import compare_outputs
from ember_xla.runtime.execute import run_module

CALIBRATE = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_cost_model.py"
FAMILIES = ("segment_reduce/sum", "segment_reduce/max", "padded_bag/sum")  # padded max: kept in XLA


def _segment_sum_module(batch: int, pooling: int, dim: int, rows: int = 20_000):
    def f(t, i, s):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=batch)

    args = (jax.ShapeDtypeStruct((rows, dim), jnp.float32),
            jax.ShapeDtypeStruct((batch * pooling,), jnp.int32),
            jax.ShapeDtypeStruct((batch * pooling,), jnp.int32))
    return from_jax(f, *args).module


def test_model_file_is_a_measurement_with_its_command():
    model = profitability.load_model()
    assert model["command"].startswith("python benchmarks/calibrate_cost_model.py")
    assert model["date"] and model["machine"]
    for fam in FAMILIES:
        entry = model["families"][fam]
        assert len(entry["points"]) >= 12
        for backend in ("ember", "xla"):
            coef = entry[backend]
            assert all(coef[k] >= 0 for k in ("c0_s", "per_lookup_elem_s", "per_output_elem_s",
                                              "per_lookup_s"))
            assert coef["c0_s"] > 0


def _calibration():
    spec = importlib.util.spec_from_file_location("calibrate_cost_model", CALIBRATE)
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    return cal


def test_constants_are_the_fit_of_the_stored_measurements():
    """Every fitted family's coefficients; the fused-update families are read only as their
    measured points (gradient_rule.py) and carry no fit."""
    cal = _calibration()
    for fam, entry in profitability.load_model()["families"].items():
        if fam in set(profitability.UPDATE_FAMILIES.values()):
            assert "ember" not in entry and "xla" not in entry, fam
            continue
        for backend in ("ember", "xla"):
            coef, _ = cal.fit(entry["points"], f"{backend}{profitability.load_model()['fit_on']}")
            stored = entry[backend]
            for got, key in zip(coef, cal.COEFFICIENTS, strict=True):
                assert math.isclose(got, stored[key], rel_tol=1e-6, abs_tol=1e-15), (fam, key)


@pytest.mark.parametrize("fam", ["segment_reduce/sum", "segment_reduce/max", "padded_bag/sum",
                                 "padded_bag/max"])
def test_every_size_the_calibration_measures_is_one_cluster(fam):
    """The calibration times one cluster per grid size: none of its sizes may be a form the
    rewrite leaves to XLA by rule (a bag or segment of one row), or the script stops there."""
    cal = _calibration()
    rng = np.random.default_rng(0)
    batches, poolings, _ = cal.grid(fam)
    for b in batches:
        for pool in poolings:
            args = [jax.ShapeDtypeStruct(a.shape, a.dtype)
                    for a in cal.inputs_for(cal.FAMILIES[fam], b, pool, 16, rng)]
            module = from_jax(cal.model_fn(cal.FAMILIES[fam], b), *args).module
            result = rewrite_module(module, cost_model=False)
            assert len(result.clusters) == 1, (fam, b, pool, result.near_misses)


def test_tiny_cluster_stays_in_xla_with_predicted_times():
    module = _segment_sum_module(batch=1, pooling=2, dim=16)
    result = rewrite_module(module, cost_model=True)
    assert not result.changed and result.module is module
    (miss,) = [n for n in result.near_misses if n.get("kept_in_xla")]
    p = miss["predicted_us"]
    assert p["ember"] > (1 - profitability.MARGIN) * p["xla"] > 0
    assert miss["reason"].startswith(f"kept in XLA: predicted native {p['ember']:.1f} us vs XLA ")
    assert result.counters["ember.segment_reduce"]["kept_in_xla"] == 1
    # Without the cost model the same cluster is rewritten.
    assert rewrite_module(module, cost_model=False).changed


def test_large_cluster_is_rewritten_and_keeps_its_prediction():
    module = _segment_sum_module(batch=2048, pooling=10, dim=64)
    result = rewrite_module(module, cost_model=True)
    (entry,) = result.clusters
    pred = entry["predicted_us"]
    assert pred["ember"] <= (1 - profitability.MARGIN) * pred["xla"]
    assert not any(n.get("kept_in_xla") for n in result.near_misses)


def test_kept_cluster_module_still_computes_the_same(monkeypatch):
    monkeypatch.setenv("EMBER_XLA_COST_MODEL", "on")
    assert profitability.enabled()
    module = _segment_sum_module(batch=1, pooling=2, dim=16, rows=50)
    result = rewrite_module(module)  # default: the environment turns the model on
    assert not result.changed
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((50, 16), dtype=np.float32), np.array([3, 7], np.int32),
              np.array([0, 0], np.int32)]
    assert compare_outputs(run_module(module, inputs),
                           run_module(result.module, inputs))["bitwise_equal"]
    monkeypatch.setenv("EMBER_XLA_COST_MODEL", "off")
    assert not profitability.enabled()


@pytest.mark.parametrize("fam", FAMILIES)
def test_every_calibrated_family_has_a_break_even(fam):
    """The model is not a constant verdict: per family, tiny work predicts XLA (per-call
    overhead) unless the kernel was measured faster even there, and the predictions grow with
    the work."""
    entry = profitability.load_model()["families"][fam]
    small = {"L": 1, "S": 1, "D": 16}
    big = {"L": 2048 * 100, "S": 2048, "D": 256}
    for backend in ("ember", "xla"):
        assert profitability._time(entry[backend], big) > profitability._time(entry[backend],
                                                                             small)



def test_near_tie_stays_in_xla():
    """B=1, 100 lookups, D=128 (the pooling-100 table of the B=1 DLRM stage): predicted a
    little faster in ember, but by less than the margin; measured no faster, so it stays."""
    module = _segment_sum_module(batch=1, pooling=100, dim=128)
    result = rewrite_module(module, cost_model=True)
    assert not result.changed
    (miss,) = [n for n in result.near_misses if n.get("kept_in_xla")]
    pred = miss["predicted_us"]
    assert (1 - profitability.MARGIN) * pred["xla"] < pred["ember"] < pred["xla"]
    assert f"not {profitability.MARGIN:.0%} faster" in miss["reason"]


def _computed_bag(rows: int, batch: int):
    """flax nn.Embed(dtype=float16): its f32 table converted on every call, bags of 20 (a
    bfloat16 dtype is read from the f32 table itself, row_type="bf16": test_rows_as_bf16.py)."""
    import flax.linen as nn

    class Bag(nn.Module):
        @nn.compact
        def __call__(self, ids):
            return nn.Embed(rows, 64, dtype=jnp.float16)(ids).sum(1)

    model = Bag()
    ids = np.random.default_rng(3).integers(0, rows, (batch, 20)).astype(np.int32)
    table = np.random.default_rng(4).standard_normal((rows, 64)).astype(np.float32)
    m = from_jax(lambda t, i: model.apply({"params": {"Embed_0": {"embedding": t}}}, i),
                 table, ids).module
    return m, table, ids


def test_large_table_computed_per_call_stays_in_xla():
    """A table computed on every call (the convert of nn.Embed(dtype=float16)), XLA fuses
    into its gather; the kernel needs it written out first: 20,000 rows for 5,120 lookups
    are predicted slower (measured 0.70x at 200,000 rows for 40,960 with a bf16 convert, as
    bf16 tables were read then), so it stays in XLA with
    the reason; rewritten and bit-equal with the cost model off."""
    m, table, ids = _computed_bag(20_000, 256)
    kept = rewrite_module(m, cost_model=True)
    assert not kept.clusters
    (miss,) = kept.near_misses
    assert "the table is computed on every call (convert" in miss["reason"], miss
    forced = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in forced.clusters] == ["padded_bag"]
    want = run_module(m, [table, ids])
    got = run_module(forced.module, [table, ids])
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_small_table_computed_per_call_is_rewritten():
    """2,000 rows converted for 40,960 lookups: the write-out is small beside the lookups
    (measured 1.48x of XLA:CPU, benchmarks/bench_computed_table.py): rewritten."""
    m, table, ids = _computed_bag(2_000, 2048)
    result = rewrite_module(m, cost_model=True)
    assert [c["kind"] for c in result.clusters] == ["padded_bag"], result.near_misses
    pred = result.clusters[0]["predicted_us"]
    assert pred["ember"] < (1 - profitability.MARGIN) * pred["xla"]
    got, want = run_module(result.module, [table, ids]), run_module(m, [table, ids])
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_computed_table_write_is_part_of_the_prediction():
    """The same cluster predicted with its table computed costs the kernel path the table's
    elements at the kernel's per-output-element cost more; XLA's side is unchanged."""
    m, _, _ = _computed_bag(20_000, 256)
    from ember_xla.rewrites.canonicalize import canonicalize
    from ember_xla.rewrites.matcher import find_clusters
    from ember_xla.rewrites.patterns import ALL_PATTERNS

    canonicalize(m)
    (c,) = find_clusters(m, list(ALL_PATTERNS)).clusters
    fam = profitability.load_model()["families"][profitability.family(c)]
    p = profitability.predict(c)
    extra = fam["ember"]["per_output_elem_s"] * 20_000 * 64
    assert profitability.computed_table_s(c, fam) == extra
    # a padded bag: read off the measured points (the fit is recorded, not used)
    plain = measured_grid.predict(fam["points"], profitability.GRID_KEYS,
                                  profitability.GRID_KEYS, {"B": 256, "P": 20, "D": 64},
                                  robust="_q1_s")
    assert p == {"ember": plain["ember"] + extra, "xla": plain["xla"]}


def test_gcn_messages_of_computed_node_features_are_rewritten():
    """A GCN layer's messages: node features scaled per node (``h * norm[:, None]``, a table
    computed on every call) gathered along 40,960 edges onto 2,000 nodes; measured 2.37x of
    XLA:CPU rewritten (benchmarks/bench_computed_table.py): rewritten, bit-equal."""
    rng = np.random.default_rng(7)
    n, e = 2000, 40960
    h = rng.standard_normal((n, 64)).astype(np.float32)
    norm = rng.uniform(0.1, 1.0, n).astype(np.float32)
    s, r = (rng.integers(0, n, e).astype(np.int32) for _ in range(2))

    def gcn(h, norm, s, r):
        return jax.ops.segment_sum((h * norm[:, None])[s], r, num_segments=n)

    m = from_jax(gcn, h, norm, s, r).module
    result = rewrite_module(m, cost_model=True)
    assert [c["kind"] for c in result.clusters] == ["segment_reduce"], result.near_misses
    args = [h, norm, s, r]
    assert all(np.array_equal(a, b) for a, b in
               zip(run_module(m, args), run_module(result.module, args), strict=True))


@pytest.mark.parametrize("dtype,form,kept", [
    ("float16", "bag", None),                # the F16C vector path: judged as an f32 bag
    ("float16", "bag_p4", None),             # sequential order, F16C too
    ("float16", "bag_half_sum", "f16 tables are not in the cost model"),
    ("float16", "segments", None),           # each f16 add rounded with F16C
    ("bfloat16", "bag", None),               # the blocked vector path
    ("bfloat16", "bag_f32", None),
    ("bfloat16", "bag_weighted", None),      # sequential FMA: the product exact in f32
    ("float16", "bag_weighted", "weighted f16 padded bags"),
    ("bfloat16", "bag_half_sum", "padded bags of bf16 tables"),
    ("bfloat16", "bag_d12", "padded bags of bf16 tables"),
    ("bfloat16", "segments", None),          # measured faster: judged as the f32 family
])
def test_half_tables_the_kernels_are_slow_on_stay_in_xla(dtype, form, kept):
    """Measured slower than XLA:CPU (benchmarks/bench_half_tables.py): f16 tables and bf16
    padded bags outside the kernels' vector paths (profitability.vector_half: unweighted bags
    summed in f32, weighted bf16 ones in the FMA order, f16 segment sums; D % 8 == 0) stay in
    XLA with the reason; rewritten with the model off."""
    d = 12 if form == "bag_d12" else 64
    p = 4 if form == "bag_p4" else 8 if form == "bag_half_sum" else 32
    t = jax.ShapeDtypeStruct((100_000, d), getattr(jnp, dtype))
    ids = jax.ShapeDtypeStruct((2048, p), jnp.int32)
    if form == "segments":
        def f(t, i, s):
            return jax.ops.segment_sum(t[i], s, num_segments=2048)
        args = (t, jax.ShapeDtypeStruct((2048 * 32,), jnp.int32),
                jax.ShapeDtypeStruct((2048 * 32,), jnp.int32))
    elif form == "bag_f32":
        def f(t, i):
            return t[i].astype(jnp.float32).sum(1)
        args = (t, ids)
    elif form == "bag_weighted":
        def f(t, i, w):
            return (t[i] * w[..., None]).sum(1)
        args = (t, ids, jax.ShapeDtypeStruct((2048, p), t.dtype))
    elif form == "bag_half_sum":   # summed in the table's type (no upcast): each add rounded
        def f(t, i):
            return jax.lax.reduce(t[i], jnp.zeros((), t.dtype), jax.lax.add, (1,))
        args = (t, ids)
    else:
        def f(t, i):
            return t[i].sum(1)
        args = (t, ids)
    m = from_jax(f, *args).module
    assert rewrite_module(m, cost_model=False).clusters
    r = rewrite_module(m, cost_model=True)
    if kept is None:
        assert r.clusters, r.near_misses
    else:
        assert not r.clusters and kept in str(r.near_misses), r.near_misses


def test_padded_bags_are_read_off_their_measured_grid():
    """The padded sum/mean family is decided by its measured points: a full grid of batch,
    pooling and D, each point with the median and lower-quartile statistics; at a measured
    size the prediction is that point's XLA median and the less favourable speedup."""
    cal = _calibration()
    fam = "padded_bag/sum"
    entry = profitability.load_model()["families"][fam]
    assert "measured_grid.py" in entry["decided_by"]
    pts = entry["points"]
    sizes = {(p["B"], p["P"], p["D"]) for p in pts}
    assert sizes == set(itertools.product(*cal.grid(fam)))
    for p in pts:
        got = measured_grid.predict(pts, profitability.GRID_KEYS, profitability.GRID_KEYS,
                                    {"B": p["B"], "P": p["P"], "D": p["D"]}, robust="_q1_s")
        speedup = min(p["xla_s"] / p["ember_s"], p["xla_q1_s"] / p["ember_q1_s"])
        assert math.isclose(got["xla"], p["xla_s"], rel_tol=1e-9)
        assert math.isclose(got["ember"], p["xla_s"] / speedup, rel_tol=1e-9)


def _padded_bags_module(batch: int, pooling: int, dim: int, rows=(1000, 50_000, 200_000, 10)):
    """Four padded bags of one batch, concatenated (a Keras / keras-rs embedding stage)."""
    def f(*args):
        ts, ids = args[:len(rows)], args[len(rows):]
        return jnp.concatenate([t[i].sum(1) for t, i in zip(ts, ids, strict=True)], 1)

    args = [jax.ShapeDtypeStruct((r, dim), jnp.float32) for r in rows] + \
        [jax.ShapeDtypeStruct((batch, pooling), jnp.int32) for _ in rows]
    return from_jax(f, *args).module


def test_small_batch_padded_bags_are_rewritten():
    """Four B=256 bags of 5 ids at D=16 (measured 2.0-2.3x of XLA:CPU rewritten,
    docs/BENCHMARKS.md): the fitted line predicted 17.3 us vs 19.8 us and kept them; the
    measured grid rewrites them. One-row bags of one id stay in XLA."""
    result = rewrite_module(_padded_bags_module(256, 5, 16), cost_model=True)
    assert [c["kind"] for c in result.clusters] == ["padded_bag"] * 4, result.near_misses
    for c in result.clusters:
        assert c["predicted_us"]["ember"] <= (1 - profitability.MARGIN) * \
            c["predicted_us"]["xla"]
    tiny = rewrite_module(_padded_bags_module(1, 2, 16), cost_model=True)
    assert not tiny.clusters
    assert len([n for n in tiny.near_misses if n.get("kept_in_xla")]) == 4


def test_table_sliced_per_call_costs_its_copy():
    """A table a loop body slices out of a stack (``lax.map`` over stacked tables) is written
    out whole before a custom call reads it, which XLA, fusing the slice into its gather,
    never does: the prediction includes that copy (sliced-table, which removes it, is left
    out of the pipeline here)."""
    from ember_xla.rewrites.canonicalize import canonicalize, default_pipeline
    from ember_xla.rewrites.matcher import find_clusters
    from ember_xla.rewrites.patterns import ALL_PATTERNS

    rng = np.random.default_rng(3)
    tables = rng.standard_normal((4, 10_000, 32)).astype(np.float32)
    ids = rng.integers(0, 10_000, (4, 64, 10)).astype(np.int32)
    m = from_jax(lambda t, i: jax.lax.map(lambda a: a[0][a[1]].sum(1), (t, i)),
                 tables, ids).module
    canonicalize(m, default_pipeline().replace("sliced-table,", ""))
    (c,) = find_clusters(m, list(ALL_PATTERNS)).clusters
    assert profitability.computed_table(c).opcode == "dynamic-slice"
    fam = profitability.load_model()["families"][profitability.family(c)]
    assert profitability.computed_table_s(c, fam) == \
        fam["ember"]["per_output_elem_s"] * 10_000 * 32
