"""The ``ember.emulate`` XLA FFI target: a rewritten module whose cluster custom-call is
switched to ``ember.emulate`` (its DAE program, the target and a cluster name as attributes)
runs on XLA:CPU with the same outputs as the original module, bit for bit, and logs one timing
report per call, equal to ``fast.emulate_program``'s; a program that does not fit the target
or a malformed program is an XLA error with the reason, never a crash. ~15 s."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest

from ember_xla.custom_calls import EMULATE, TARGETS, is_ember_call, is_emulate_call
from ember_xla.dae_target.lower.cluster import cluster_spec, ember_calls
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.dae_target.program import emit_program
from ember_xla.emulator.fast import emulate_attributes, emulate_program, take_reports
from ember_xla.emulator.target import load_target
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

TMU = load_target("tmu")


def segment_sum(table, ids, seg):
    import jax
    import jax.numpy as jnp

    return jax.ops.segment_sum(jnp.take(table, ids, axis=0, mode="clip"), seg, num_segments=5)


def bag_max(table, ids):
    import jax.numpy as jnp

    return jnp.take(table, ids, axis=0, mode="fill", fill_value=0).sum(axis=1)


def emulated(fn, args, level, target=TMU, name="c0"):
    """(original module, the rewritten one with its cluster on ember.emulate, the program)."""
    model = from_jax(fn, *args)
    rw = rewrite_module(model.module).module
    (call,) = ember_calls(rw)
    spec = cluster_spec(call)
    program = emit_program(lower_cluster(spec, level)[-1][1], [a.shape for a in spec.operands])
    call.attributes["custom_call_target"] = EMULATE.name
    call.attributes["ember"] = emulate_attributes(program, target, name)
    assert is_emulate_call(call) and not is_ember_call(call)
    return model.module, rw, program


CASES = {
    "segment_sum_clip": (segment_sum, lambda r: (
        r.standard_normal((50, 16)).astype(np.float32),
        np.array([3, -1, 70, 3, 0, 49, 12, 7], np.int32),          # negative, out of range
        np.array([0, 0, 1, 1, 1, 3, 3, 3], np.int32))),            # segments 2, 4 empty
    "padded_bag_fill": (bag_max, lambda r: (
        r.standard_normal((30, 8)).astype(np.float32),
        np.array([[1, 1, 29], [-3, 30, 0], [5, 6, 7], [0, 0, 0]], np.int32))),
}


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_emulate_target_equals_the_original_module(case, level):
    fn, make = CASES[case]
    args = make(np.random.default_rng(level))
    original, rw, program = emulated(fn, args, level, name=f"{case}-O{level}")
    take_reports()
    want = run_module(original, list(args))
    got = run_module(rw, list(args))
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.tobytes() == g.tobytes()
    (name, report), = take_reports()
    assert name == f"{case}-O{level}" and report.tokens > 0
    if case != "segment_sum_clip":
        return  # its cluster's operands are computed in the module (ids -> segment ids)
    # the cluster's operands are the entry's parameters here: the same run in fast.py
    _, direct = emulate_program(program, list(args), TMU)
    assert report == direct        # cycles, stalls, traffic, hit rates by level name, clock
    assert take_reports() == []


def test_each_call_logs_a_report():
    fn, make = CASES["segment_sum_clip"]
    args = make(np.random.default_rng(0))
    _, rw, _ = emulated(fn, args, 3)
    take_reports()
    for _ in range(3):
        run_module(rw, list(args))
    assert [n for n, _ in take_reports()] == ["c0"] * 3


def test_program_that_does_not_fit_is_an_error():
    fn, make = CASES["segment_sum_clip"]
    args = make(np.random.default_rng(0))
    small = dc.replace(TMU, access=dc.replace(TMU.access, data_queue_bytes=4))
    _, rw, _ = emulated(fn, args, 3, target=small)
    with pytest.raises(Exception, match="does not fit"):
        run_module(rw, list(args))


def test_malformed_program_is_an_error():
    fn, make = CASES["segment_sum_clip"]
    args = make(np.random.default_rng(0))
    _, rw, _ = emulated(fn, args, 3)
    (call,) = [op for g in rw.graphs for op in g.ops if is_emulate_call(op)]
    call.attributes["ember"] = dict(call.attributes["ember"], program="ember-dae 1;nonsense")
    with pytest.raises(Exception, match="ember.emulate"):
        run_module(rw, list(args))


def test_registry_entry():
    t = TARGETS["ember.emulate"]
    assert t.ffi_symbol == "EmberEmulate" and t.library == "emulator"
    assert t.attributes == ("cluster", "program", "target")
