"""The training-step corpus (tests/rewrites/training_models.py: flax linen and nnx, haiku,
equinox, jraph, a token-embedding language model, Keras 3 on TF; optax and Keras SGD, Adagrad,
Adam; a donated variant): every forward cluster is found through the JVP wrappers of
``value_and_grad`` (a missed one fails the test with the matcher's reason), and the rewritten
step equals the original on XLA:CPU -- loss, gradients' effect on the parameters and the
optimizer state -- with ``xla_allow_excess_precision`` true and false, for random, edge and
out-of-range inputs; bitwise unless the step states a tolerance. The backward clusters are
held to each step's record (known gaps are strict expected failures)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ember_xla.hlo.verifier import verify_module
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

tm = sys.modules["training_models"]  # loaded by conftest.py


def _forward(result) -> list[dict]:
    return [c for c in result.clusters if c.get("pass", "forward") == "forward"]


@pytest.fixture(scope="module")
def rewritten():
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = rewrite_module(tm.export(name)[0].module)
        return cache[name]
    return get


def test_corpus_covers_the_libraries_and_optimizers():
    libraries = {s.library for s in tm.STEPS.values()}
    assert {"flax", "haiku", "equinox", "jraph", "keras", "optax"} <= libraries
    optimizers = {(s.framework, s.optimizer) for s in tm.STEPS.values()}
    assert {("jax", "sgd"), ("jax", "adagrad"), ("jax", "adam"), ("tf", "sgd"),
            ("tf", "adagrad")} <= optimizers
    assert any(s.donate for s in tm.STEPS.values())


@pytest.mark.parametrize("name", sorted(tm.STEPS))
def test_every_forward_cluster_is_found(name, rewritten):
    step = tm.STEPS[name]
    result = rewritten(name)
    kinds = sorted(c["kind"] for c in _forward(result))
    reasons = [(n["location"]["instruction"], n["reason"]) for n in result.near_misses]
    assert kinds == sorted(step.forward), reasons
    assert not any("get-tuple-element" in r or "jvp" in r for _, r in reasons), reasons
    verify_module(result.module)


@pytest.mark.parametrize("name", sorted(n for n, s in tm.STEPS.items() if s.donate))
def test_donation_is_kept(name, rewritten):
    """A donated step's aliases (parameter -> output) survive the rewrite unchanged."""
    original = tm.export(name)[0].module
    alias = original.attributes.get("input_output_alias")
    assert alias and alias.get("entries"), "the export lost donate_argnums"
    assert rewritten(name).module.attributes.get("input_output_alias") == alias


def _equal(got, want, tolerance: float, what: str) -> None:
    assert len(got) == len(want), what
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, what
        if tolerance == 0.0:
            assert a.tobytes() == b.tobytes(), (what, a, b)
        else:
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                                       rtol=tolerance, atol=tolerance, equal_nan=True,
                                       err_msg=what)


@pytest.mark.parametrize("excess_precision", [True, False])
@pytest.mark.parametrize("name", sorted(tm.STEPS))
def test_rewritten_step_equals_xla(name, excess_precision, rewritten):
    step = tm.STEPS[name]
    original, result = tm.export(name)[0].module, rewritten(name)
    assert result.changed or not step.forward
    for case in ("random", "edge", "oob"):
        args = tm.inputs(name, case)
        want = run_module(original, args, {"xla_allow_excess_precision": excess_precision})
        got = run_module(result.module, args, {"xla_allow_excess_precision": excess_precision})
        _equal(got, want, step.tolerance, f"{name}/{case}/excess_precision={excess_precision}")


def test_steps_really_train():
    """The corpus steps change their parameters (a step that updates nothing would make the
    equivalence above vacuous)."""
    for name in sorted(tm.STEPS):
        model, example = tm.export(name)
        outs = run_module(model.module, tm.inputs(name, "random"))
        params = {a.tobytes() for a in example if a.dtype.kind == "f" and a.ndim == 2}
        moved = [o for o in outs if o.ndim == 2 and o.dtype.kind == "f"
                 and o.tobytes() not in params]
        assert moved, name


# Steps whose backward the rewrite does not yet give as recorded (what it gives instead); each
# is an expected failure, strict: once the rewrite gets it right the test fails until the entry
# is removed here.
BACKWARD_GAPS: dict[str, str] = {}


def _backward_record(name: str):
    marks = ([pytest.mark.xfail(strict=True, reason=BACKWARD_GAPS[name])]
             if name in BACKWARD_GAPS else [])
    return pytest.param(name, marks=marks)


def backward_entries(result) -> list[dict]:
    """The step's backward: rewritten gradient clusters and the backward near-misses kept in
    XLA (a TF/Keras optimizer's sparse apply), one per table gradient."""
    return ([c for c in result.clusters if c.get("pass") == "backward"]
            + [n for n in result.near_misses if n.get("pass") == "backward"])


@pytest.mark.parametrize("name", [_backward_record(n) for n in sorted(tm.STEPS)])
def test_backward_clusters_match_the_record(name, rewritten):
    """One backward entry per recorded table gradient, with the recorded optimizer fused; a
    None entry (the update stays in XLA) gives the recorded reason."""
    step = tm.STEPS[name]
    entries = backward_entries(rewritten(name))
    want = [_on_this_cpu(o) for o in step.backward]
    found = sorted((e.get("optimizer") or "") for e in entries)
    assert found == sorted(o or "" for o in want), rewritten(name).near_misses
    refused = [o for o in step.backward if o != _on_this_cpu(o)]
    for e in entries:
        if not e.get("optimizer"):
            reason = e.get("optimizer_reason") or e.get("reason", "")
            if refused and RSQRT_REFUSAL in reason:
                refused.pop()
                continue
            assert step.refusal and step.refusal in reason, (step.refusal, reason)
    assert not refused


# optax Adagrad is fused only where the kernel's rsqrt is XLA:CPU's (the estimate instruction
# differs between CPU vendors: native/rsqrt_probe.py); elsewhere its update stays in XLA with
# this reason, and the step must still equal XLA's
RSQRT_REFUSAL = "the kernel's rsqrt does not reproduce XLA:CPU's on this machine"


def _on_this_cpu(optimizer: str | None) -> str | None:
    from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

    return None if optimizer == "adagrad" and not rsqrt_matches_xla() else optimizer
