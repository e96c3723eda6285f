"""Training steps of the library corpus (tests/rewrites/training_models.py) emulated on the
DAE machine: forward and backward clusters (``scatter_grad``, ``sparse_sgd``, the fused
``sparse_adagrad`` and ``sparse_rowwise_adagrad``, Keras's ``ordered_scatter``) compiled and
run by both engines, on random ids and the corpus's edge and out-of-range ids; the step's
outputs (loss, updated table and accumulator) bit-equal to the original step on XLA:CPU (with
``xla_allow_excess_precision`` true and false), every
emulated cluster bit-equal to its native kernel (Python engine), the C++ and Python timing
models equal, each report entry saying its pass. Where the CPU keeps Adagrad's update in XLA,
its step is emulated whole. ``ember-xla emulate STEP.pb --json``
reports the backward clusters.
Cost: ~60 s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
from ember_xla.orchestrate.rewrite_model import rewrite_for

sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
import training_models as tm  # noqa: E402
from training_steps import fused_here, same_bits  # noqa: E402

TMU = load_target("tmu")
STEPS = {  # step -> the backward kinds it must emulate
    "flax_linen_bag_sum_sgd_donated": ["sparse_sgd"],
    "haiku_embed_segment_sum_sgd": ["sparse_sgd"],
    "flax_linen_bf16_bag_sum_sgd": ["scatter_grad"],
    "jraph_gcn_node_embed_sgd": ["scatter_grad", "sparse_sgd"],
    "flax_linen_bag_sum_adagrad": ["sparse_adagrad"],
    "flax_nnx_bag_mean_adagrad": ["sparse_adagrad"],
    "keras_embedding_average_sgd": ["ordered_scatter"],
}


def _emulate(name: str, case: str, engine: str, level: int = 3, fallback: bool = False):
    model, _ = tm.export(name)
    rewritten = rewrite_for(model.module, "dae").module
    xs = tm.inputs(name, case)
    em = emulate_module(model.module, rewritten, xs,
                        EmulateOptions(TMU, level, engine=engine, native_fallback=fallback))
    return model, xs, em


@pytest.mark.parametrize("engine", ["xla", "python"])
@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_emulated_and_verified(name, engine):
    from ember_xla.runtime.execute import run_module

    kinds = {k for k in STEPS[name] if k in ("sparse_adagrad", "sparse_rowwise_adagrad")}
    if kinds and not all(fused_here(k) for k in kinds):
        pytest.skip(f"{', '.join(kinds)} not fused on this CPU (test_unfused_adagrad_step_...)")

    for case in ("random", "edge", "oob"):
        model, xs, em = _emulate(name, case, engine)
        assert em.ok, (case, em.report.verify)
        for excess in (True, False):  # XLA:CPU's result under both precision settings
            want = run_module(model.module, xs, {"xla_allow_excess_precision": excess})
            assert all(same_bits(w, g) for w, g in zip(want, em.outputs, strict=True)), (
                case, excess)
        checks = em.report.verify["clusters_vs_native"]  # both engines compare them
        assert len(checks) == len(em.report.clusters), checks
        assert all(c["bitwise_equal"] for c in checks), checks
        d = em.report.as_dict()
        back = [c for c in d["clusters"] if c["pass"] == "backward"]
        assert sorted(c["kind"].removeprefix("ember.") for c in back) == sorted(STEPS[name])
        assert all(c["emulated"] and c["cycles"] > 0 for c in back)
        assert all(c["pass"] == "forward" for c in d["clusters"] if c not in back)


def test_xla_and_python_cycles_agree_at_O0():
    _, _, em = _emulate("haiku_embed_segment_sum_sgd", "edge", "python", level=0)
    assert em.ok
    py = [c.timing.cycles for c in em.report.clusters]
    _, _, em2 = _emulate("haiku_embed_segment_sum_sgd", "edge", "xla", level=0)
    assert em2.ok and [c.timing.cycles for c in em2.report.clusters] == py


#: steps whose forward the DAE rewrite gives another summation order than XLA:CPU's (a
#: weighted vmapped bag; bags of 32 rows and more that XLA:CPU sums with YNNPACK's blocked order,
#: while the DAE programs add a bag's rows one after the other: patterns/padded_bag.py,
#: xla_order=False): held to the emulator's verdict (XLA to a tolerance), every cluster, the
#: fused updates included, equal to its kernel bit for bit
TOLERANT = {"jax_two_tables_rowwise_adagrad_fused": ["sparse_rowwise_adagrad"] * 2,
            "flax_linen_bag_sum_optax_rowwise_adagrad": ["sparse_rowwise_adagrad"],
            "equinox_embedding_weighted_bag_adagrad": ["sparse_adagrad"]}


@pytest.mark.parametrize("name", sorted(TOLERANT))
def test_fused_update_of_tolerant_step_emulated(name):
    if not fused_here(TOLERANT[name][0]):
        pytest.skip(f"{TOLERANT[name][0]} is not fused on this CPU")
    for case in ("edge", "oob"):
        _, _, em = _emulate(name, case, "xla")
        assert em.ok, em.report.verify
        d = em.report.as_dict()
        back = [c["kind"] for c in d["clusters"] if c["pass"] == "backward"]
        assert back == [f"ember.{k}" for k in TOLERANT[name]]
        assert all(c["emulated"] for c in d["clusters"])
        assert all(c["bitwise_equal"] for c in em.report.verify["clusters_vs_native"])


def test_unfused_adagrad_step_emulated():
    """Where the kernel's rsqrt is not XLA's, optax Adagrad's update stays in XLA and the
    step's clusters (the forward and the gradient) are all emulated and verified."""
    if fused_here("sparse_adagrad"):
        pytest.skip("Adagrad is fused on this CPU (test_step_emulated_and_verified)")
    model, xs, em = _emulate("flax_linen_bag_sum_adagrad", "edge", "xla")
    assert em.ok
    from ember_xla.runtime.execute import run_module

    want = run_module(model.module, xs)
    assert all(same_bits(w, g) for w, g in zip(want, em.outputs, strict=True))
    d = em.report.as_dict()
    assert [c["kind"] for c in d["clusters"] if c["pass"] == "backward"] == [
        "ember.scatter_grad"]
    assert all(c["emulated"] for c in d["clusters"])


def test_cli_emulate_training_step_json(cli, tmp_path):
    model, _ = tm.export("jraph_gcn_node_embed_sgd")
    path = tmp_path / "step.pb"
    path.write_bytes(module_to_proto(model.module))
    p = cli("emulate", str(path), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["verify"]["ok"]
    passes = [(c["kind"], c["pass"]) for c in rep["clusters"]]
    assert ("ember.scatter_grad", "backward") in passes
    assert ("ember.sparse_sgd", "backward") in passes
    assert all(c["cycles"] > 0 for c in rep["clusters"])
    assert np.isclose(rep["total_cycles"], sum(c["cycles"] for c in rep["clusters"]))
