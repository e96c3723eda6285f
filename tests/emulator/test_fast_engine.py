"""The fast engine (native kernel outputs + the executor's addresses mode) against the full
functional executor, for every cluster kind of the corpus (edge ids, training steps): on one
core (``emulate_module``, engine fast vs xla, at -O0 and -O3 on tmu, -O0 on tiny) the same
cycles and report per cluster and the same model outputs, the model verified; on tmu8's cores
(``emulate_on_cores``, fast vs full) the same plan, per-core reports, piece ends and outputs.
A program the addresses mode cannot run is timed in the full mode and its outputs checked."""

from __future__ import annotations

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.machines.config import load_target

kinds = load_helper("emulator/test_kinds_on_targets.py", "kinds_on_targets")
TMU, TINY, TMU8 = load_target("tmu"), load_target("tiny"), load_target("tmu8")


@pytest.fixture(scope="module", params=sorted(kinds.KINDS) + sorted(kinds.STEPS))
def model(request):
    return _model(request.param)


def _model(name: str):
    import sys
    from pathlib import Path

    from ember_xla.hlo_import.jax_source import from_jax

    if name in kinds.STEPS:
        sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
        import training_models as tm

        return tm.export(kinds.STEPS[name])[0], tm.inputs(kinds.STEPS[name], "edge")
    fn, inputs = kinds.KINDS[name](np.random.default_rng(7))
    return from_jax(fn, *inputs), inputs


def _same_outputs(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


@pytest.mark.parametrize("target,level", [(TMU, 3), (TMU, 0), (TINY, 0)],
                         ids=["tmu-O3", "tmu-O0", "tiny-O0"])
def test_one_core_fast_equals_full(model, target, level):
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    m, inputs = model
    rewritten = rewrite_for(m.module, "dae").module
    runs = {e: emulate_module(m.module, rewritten, inputs,
                              EmulateOptions(target, level, e, native_fallback=True))
            for e in ("fast", "xla")}
    fast, full = runs["fast"], runs["xla"]
    assert full.ok and fast.ok, (full.report.verify, fast.report.verify)
    assert fast.report.engine == "C++ fast" and full.report.engine == "C++ in XLA"
    timed = [c for c in full.report.clusters if c.timing is not None]
    assert timed
    assert [(c.custom_call, c.timing) for c in fast.report.clusters] == \
        [(c.custom_call, c.timing) for c in full.report.clusters]
    _same_outputs(fast.outputs, full.outputs)
    v = fast.report.verify
    named = {x["custom_call"] for x in v["clusters_outputs_native"] + v["clusters_vs_native"]}
    assert named == {c.custom_call for c in timed}
    assert all(x["bitwise_equal"] for x in v["clusters_vs_native"])


def test_cores_fast_equals_full(model):
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.rewrite_model import rewrite_for_placement

    m, inputs = model
    rewritten = rewrite_for_placement(m.module).module
    runs = {e: emulate_on_cores(m.module, rewritten, inputs, TMU8, "auto",
                                native_fallback=True, engine=e) for e in ("fast", "full")}
    fast, full = runs["fast"], runs["full"]
    assert full.ok and fast.ok
    assert fast.plan.as_dict() == full.plan.as_dict()
    assert fast.timing.cores == full.timing.cores
    assert fast.timing.ends == full.timing.ends
    assert fast.fallback == full.fallback
    _same_outputs(fast.outputs, full.outputs)
    checked = {c["custom_call"] for c in full.verify["clusters_vs_native"]}
    native = {c["custom_call"] for c in fast.verify["clusters_outputs_native"]}
    assert native | {c["custom_call"] for c in fast.verify["clusters_vs_native"]} == checked


def test_cores_engine_is_checked():
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores

    m, inputs = _model("weighted")
    with pytest.raises(ValueError, match="engine 'python': expected one of full, fast"):
        emulate_on_cores(m.module, m.module, inputs, TMU8, "auto", engine="python")


def test_a_program_the_addresses_mode_refuses_is_timed_in_full_and_checked():
    """The fused SGD update's program (a per-row flag the core writes decides a branch)."""
    from ember_xla.dae_target.check import random_inputs
    from ember_xla.emulator.executor_cc import AddressesUnsupported, emulate_program, time_program
    from ember_xla.emulator.fast_engine import FULL, time_cluster

    addresses = load_helper("emulator/test_addresses_mode.py", "addresses_mode_tests")
    program, spec = addresses._backward_programs(3, sgd=True)["sparse_sgd"]
    inputs = random_inputs(spec, np.random.default_rng(0), None)
    with pytest.raises(AddressesUnsupported):
        time_program(program, inputs, TMU)
    outs, timing = emulate_program(program, inputs, TMU)
    ft = time_cluster(program, inputs, outs, TMU)
    assert ft.mode == FULL and ft.timing == timing and "addresses mode" in ft.why_full
    _same_outputs(ft.outputs, outs)


def test_a_cluster_in_a_nested_computation_runs_on_the_xla_engine_by_default():
    """The capture cannot reach a call inside a loop body: the default engine is then the full
    executor inside the model (and says so); asking for the fast engine is a one-line error."""
    import jax

    from ember_xla.emulator.capture import NotCapturable
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    def f(t, i):
        def body(k, acc):
            return acc + jax.numpy.take(t, i, axis=0).sum(1)
        return jax.lax.fori_loop(0, 3, body, jax.numpy.zeros((i.shape[0], t.shape[1]), t.dtype))

    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((40, 16)).astype(np.float32),
              rng.integers(0, 40, (6, 4)).astype(np.int32)]
    m = from_jax(f, *inputs)
    rewritten = rewrite_for(m.module, "dae").module
    em = emulate_module(m.module, rewritten, inputs, EmulateOptions(TMU, 3))
    assert em.ok and em.report.engine == "C++ in XLA"
    assert em.report.verify["clusters_unchecked"] and em.report.total_cycles > 0
    with pytest.raises(NotCapturable, match="inside a nested computation: the fast engine.*"
                                            r"--engine=xla") as e:
        emulate_module(m.module, rewritten, inputs, EmulateOptions(TMU, 3, "fast"))
    assert "\n" not in str(e.value)
