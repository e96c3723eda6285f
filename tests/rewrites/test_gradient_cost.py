"""The cost model's verdict on an unfused lookup gradient (Adam's, whose update stays in XLA):
predicted slower than XLA's scatter, it goes back to XLA as a call of its outlined
computation, reported as a kept near-miss with its predicted times; a big table's stays
rewritten. (Fused updates: test_fused_update_cost.py.) ~15 s (exports a few training steps,
runs the small ones on XLA:CPU)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.rewrites import gradient_rule, profitability
from ember_xla.rewrites.keep_in_xla import keep_in_xla
from ember_xla.rewrites.patterns import ScatterGrad
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

FAMILY = "scatter_grad/sum"


def _kept_gradients(r) -> list[dict]:
    return [n for n in r.near_misses
            if n.get("kept_in_xla") and n["pattern"] == "ember.scatter_grad"]


def _small_step(opt: optax.GradientTransformation):
    rng = np.random.default_rng(0)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng)
    return ts.optax_step(ts.bag_take(w), opt), (t, opt.init(t), ids, y)


def test_the_model_has_the_gradient_family():
    entry = profitability.load_model()["families"][FAMILY]
    assert {p["form"] for p in entry["points"]} == {"plain", "gathered"}
    assert entry["command"].startswith("python benchmarks/calibrate_cost_model.py")
    assert entry["date"] and entry["load_average"]
    assert len(entry["points"]) == 96 and "gradient_rule.py" in entry["decided_by"]


def test_the_rule_reads_the_measured_grid():
    """At a grid point the predicted XLA time is the measured median; the speedup is the cell's
    less favourable statistic; off the grid it lies between its neighbours' and is clamped
    outside; small tables stay in XLA (not MARGIN faster), a big table with few lookups is the
    kernel's."""
    pts = profitability.load_model()["families"][FAMILY]["points"]
    p = next(q for q in pts if q["form"] == "plain" and (q["V"], q["L"], q["D"]) == (
        100_000, 10_000, 64))
    got = gradient_rule.predict(pts, "plain", 100_000, 10_000, 64)
    assert got["xla"] == pytest.approx(p["xla_s"])
    cell = [q for q in pts if q["form"] == "plain" and (q["V"], q["L"]) == (100_000, 10_000)]
    want = min(np.median([q["xla_s"] / q["ember_s"] for q in cell]),
               np.median([q["xla_min_s"] / q["ember_min_s"] for q in cell]))
    assert got["xla"] / got["ember"] == pytest.approx(want)
    mid = gradient_rule.predict(pts, "plain", 100_000, 31_623, 64)
    ends = [gradient_rule.predict(pts, "plain", 100_000, n, 64) for n in (10_000, 100_000)]
    speed = [e["xla"] / e["ember"] for e in ends]
    assert min(speed) <= mid["xla"] / mid["ember"] <= max(speed)
    assert gradient_rule.predict(pts, "plain", 10, 10, 2) == gradient_rule.predict(
        pts, "plain", 1000, 1000, 16)
    for form in ("plain", "gathered"):
        small = gradient_rule.predict(pts, form, 1000, 1000, 16)
        big = gradient_rule.predict(pts, form, 1_000_000, 10_000, 64)
        assert small["ember"] > (1 - profitability.MARGIN) * small["xla"]       # kept
        assert big["ember"] < (1 - profitability.MARGIN) * big["xla"]           # rewritten


def test_small_table_adam_gradient_is_kept_in_xla_and_computes_the_same():
    step, args = _small_step(optax.adam(1e-2))
    r = ts.check_step(step, *args, cost_model=True)  # bit-equal outputs, both precisions
    assert not ts.backward(r)
    (miss,) = _kept_gradients(r)
    p = miss["predicted_us"]
    assert p["ember"] > (1 - profitability.MARGIN) * p["xla"] > 0
    assert miss["reason"].startswith(f"kept in XLA: predicted native {p['ember']:.1f} us vs XLA ")
    assert miss["reason"].endswith("unfused gradient)") and FAMILY in miss["reason"]
    assert miss["decision"] == "xla" and miss["pass"] == "backward"
    assert miss["location"]["computation"] and miss["location"]["instruction"]
    assert r.counters["ember.scatter_grad"]["kept_in_xla"] == 1
    assert not any(op.opcode == "custom-call" and "scatter_grad" in op.name
                   for op in r.module.walk())
    # The cost model off (the test suite's default) rewrites it.
    (e,) = ts.backward(ts.check_step(step, *args, cost_model=False))
    assert e["kind"] == "scatter_grad" and e["optimizer"] is None


def test_a_kept_gradient_runs_as_its_outlined_ops():
    """The call that replaces a kept gradient's custom-call computes XLA's bits (here the only
    cluster of the step, so ``rewrite_module`` returns the input module: this builds the call
    module itself)."""
    step, args = _small_step(optax.adam(1e-2))
    module = from_jax(step, *args).module
    r = rewrite_module(module, [ScatterGrad()], cost_model=False)
    (e,) = r.clusters
    call = keep_in_xla(r.module, e["custom_call"], PatternRewriter())
    assert call.opcode == "call" and call.callees[0].name == e["outlined_computation"]
    assert not any(op.opcode == "custom-call" for op in r.module.walk())
    ins = ts.flat(args)
    for opts in ts.OPTIONS:
        want, got = run_module(module, ins, opts), run_module(r.module, ins, opts)
        assert all(ts.same_bits(a, b) for a, b in zip(want, got, strict=True)), opts
    with pytest.raises(ValueError, match="no custom-call nope"):
        keep_in_xla(r.module, "nope", PatternRewriter())


def test_big_table_adam_gradient_stays_rewritten():
    V, D, L = 1_000_000, 64, 40_000
    opt = optax.adam(1e-3)
    w = np.ones((D, 1), np.float32)
    table = jax.ShapeDtypeStruct((V, D), jnp.float32)
    state = jax.eval_shape(opt.init, table)
    args = (table, state, jax.ShapeDtypeStruct((L // 4, 4), jnp.int32),
            jax.ShapeDtypeStruct((L // 4,), jnp.float32))
    r = rewrite_module(from_jax(ts.optax_step(ts.bag_take(w), opt), *args).module,
                       cost_model=True)
    (e,) = ts.backward(r)
    assert e["kind"] == "scatter_grad" and e["optimizer"] is None
    assert e["predicted_us"]["ember"] <= (1 - profitability.MARGIN) * e["predicted_us"]["xla"]
    assert not _kept_gradients(r)


