"""The cost model's verdict on a fused optimizer update: a lookup's gradient and its SGD /
Adagrad / rowwise Adagrad update of a table the caller keeps become one ``ember.sparse_*``
call only where that call is predicted ``MARGIN`` faster than XLA's scatter and dense update,
by the measured ``sparse_update/<optimizer>`` grid of the call's form; otherwise the update
stays in XLA with that reason and the unfused gradient is judged on its own. A donated
table's update is fused unjudged (``profitability.JUDGE_DONATED``). ~20 s
(exports small training steps and runs them on XLA:CPU)."""

from __future__ import annotations

import copy
import itertools

import jax
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.rewrites import profitability

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

FAMILIES = ("sparse_update/sgd", "sparse_update/adagrad", "sparse_update/rowwise_adagrad")


def _model(kept: float, donated: float) -> dict:
    """The installed model with every sparse_update family replaced by a flat grid on which the
    fused call takes ``kept`` (table kept by the caller) or ``donated`` times XLA's time."""
    model = copy.deepcopy(profitability.load_model())
    for fam in FAMILIES:
        model["families"].setdefault(fam, {})["points"] = [
            {"form": form, "donated": don, "V": v, "L": n, "D": d, "S": v, "xla_s": 1e-3,
             "xla_min_s": 1e-3, "ember_s": 1e-3 * (donated if don else kept),
             "ember_min_s": 1e-3 * (donated if don else kept)}
            for form, don, v, n, d in itertools.product(
                ("plain", "gathered"), (False, True), (1_000, 1_000_000), (100, 100_000),
                (16, 128))]
    return model


def _sgd_step(donate: bool = False):
    rng = np.random.default_rng(0)
    opt = optax.sgd(0.1)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng)
    step = ts.optax_step(ts.bag_take(w), opt)
    return (jax.jit(step, donate_argnums=0) if donate else step), (t, opt.init(t), ids, y)


def test_the_model_has_the_fused_update_families():
    for fam in FAMILIES:
        entry = profitability.load_model()["families"][fam]
        pts = entry["points"]
        assert {(p["form"], p["donated"]) for p in pts} == {
            (f, d) for f in ("plain", "gathered") for d in (False, True)}
        assert len(pts) == 128 and "gradient_rule.py" in entry["decided_by"]
        assert entry["command"].startswith("python benchmarks/calibrate_cost_model.py")
        assert entry["date"] and entry["load_average"]


def test_an_update_predicted_slower_stays_in_xla_with_its_reason(monkeypatch):
    model = _model(kept=1.0, donated=1.0)
    monkeypatch.setattr(profitability, "load_model", lambda: model)
    step, args = _sgd_step()
    r = ts.check_step(step, *args, cost_model=True)  # bit-equal, both precisions
    assert not any("sparse_sgd" in op.name for op in r.module.walk())
    entries = ts.backward(r) + [n for n in r.near_misses if n.get("pass") == "backward"]
    (e,) = [e for e in entries if "fused_predicted_us" in e]
    p = e["fused_predicted_us"]
    assert p == {"ember": 1000.0, "xla": 1000.0}
    assert e["optimizer_reason"].startswith(
        "kept in XLA: the fused sgd update is predicted 1000.0 us vs XLA's scatter and dense "
        "update 1000.0 us, not 25% faster (sparse_update/sgd, ")
    assert e["optimizer_reason"].endswith("table kept by the caller)")


def test_an_update_predicted_faster_is_fused(monkeypatch):
    model = _model(kept=0.5, donated=0.5)
    monkeypatch.setattr(profitability, "load_model", lambda: model)
    step, args = _sgd_step()
    r = ts.check_step(step, *args, cost_model=True)
    (e,) = ts.backward(r)
    assert e["optimizer"] == "sgd" and e["decision"] == "fused"
    assert e["predicted_us"] == {"ember": 500.0, "xla": 1000.0}


def test_a_donated_tables_update_is_fused_unjudged(monkeypatch):
    """The donated points do not describe updates inside a whole training step yet
    (profitability.JUDGE_DONATED): a donated table's update is fused whatever they say."""
    model = _model(kept=1.0, donated=1.0)
    monkeypatch.setattr(profitability, "load_model", lambda: model)
    step, args = _sgd_step(donate=True)
    r = ts.check_step(step, *args, cost_model=True)
    (e,) = ts.backward(r)
    assert e["optimizer"] == "sgd" and e["decision"] == "fused"
    assert "fused_predicted_us" not in e


@pytest.mark.parametrize("donate", [False, True])
def test_the_table_donation_picks_the_points(monkeypatch, donate):
    """Kept by the caller the kernel writes a new table; donated it updates in place: each
    reads its own measurements (once donated updates are judged)."""
    model = _model(kept=1.0, donated=0.5)
    monkeypatch.setattr(profitability, "load_model", lambda: model)
    monkeypatch.setattr(profitability, "JUDGE_DONATED", True)
    step, args = _sgd_step(donate)
    r = ts.check_step(step, *args, cost_model=True)
    entries = ts.backward(r) + [n for n in r.near_misses if n.get("pass") == "backward"]
    assert [e.get("optimizer") == "sgd" for e in entries] == [donate]
    assert ("fused_predicted_us" in entries[0]) == (not donate)


@pytest.mark.parametrize("opt", ["sgd", "adagrad"])
def test_the_installed_model_decides_as_it_predicts(opt):
    """With the calibrated grid: fused exactly when predicted MARGIN faster, bit-equal either
    way."""
    rng = np.random.default_rng(1)
    o = optax.sgd(0.1) if opt == "sgd" else optax.adagrad(0.1)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), o), t, o.init(t), ids, y, cost_model=True)
    entries = ts.backward(r) + [n for n in r.near_misses if n.get("pass") == "backward"]
    (e,) = [e for e in entries if e.get("optimizer") == opt or "fused_predicted_us" in e]
    p = e.get("fused_predicted_us") or e["predicted_us"]
    faster = p["ember"] <= (1 - profitability.MARGIN) * p["xla"]
    assert (e.get("optimizer") == opt) == faster
