"""The C++ executor's addresses mode (``executor_cc.time_program``, ``run_program_fast(...,
mode="addresses")``) against its full mode: for every cluster kind the emitter supports at
-O0..-O4 and every edge case, the same trace event for event, the same case costs and the same
timing report on two targets — or a one-line ``AddressesUnsupported`` when computed data would
decide an address or a branch (then the full mode is the one to use), and the same run-time
error when the full mode fails. The common kinds (sum/mean/max bags, segment reductions, the
backward scatter) must run in the addresses mode."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.dae_target.check import EDGE_CASES, random_inputs
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.program import emit_program
from ember_xla.emulator.executor_cc import (
    AddressesUnsupported,
    emulate_program,
    run_program_fast,
    time_program,
)
from ember_xla.ir.interpreter import InterpretError
from ember_xla.machines.config import load_target

TMU, TINY = load_target("tmu"), load_target("tiny")

dae_cases = load_helper("emulator/dae_cases.py")
CASES, dlc, slc_examples = dae_cases.CASES, dae_cases.dlc, dae_cases.slc_examples

def same_as_full(program, inputs, shapes=None) -> bool:
    """True when the addresses mode ran and agreed with the full mode; False when it refused
    (AddressesUnsupported). Fails the test on any disagreement."""
    try:
        _, full = run_program_fast(program, inputs, shapes)
    except InterpretError as e:
        with pytest.raises((InterpretError, AddressesUnsupported)):
            run_program_fast(program, inputs, shapes, mode="addresses")
        del e
        return True
    try:
        outs, addr = run_program_fast(program, inputs, shapes, mode="addresses")
    except AddressesUnsupported as e:
        assert "\n" not in str(e) and "addresses mode cannot run it" in str(e)
        return False
    assert outs == []
    dae_cases.assert_same_trace(addr, full)
    dae_cases.assert_same_timing(lambda t: emulate_program(program, inputs, t, shapes)[1],
                                 lambda t: time_program(program, inputs, t, shapes),
                                 (TMU, TINY))
    return True


#: kinds whose programs must run in the addresses mode at every level
MUST_RUN = ("offsets", "seg", "padded", "grouped")


@pytest.mark.parametrize("level", range(5))
@pytest.mark.parametrize("case", CASES)
def test_addresses_mode_equals_the_full_mode(case, level):
    try:
        module, spec = dlc(case, level)
    except ValueError as e:   # the rewrite makes no cluster of it in this build
        pytest.skip(f"{case}: no cluster to lower ({e})")
    program = emit_program(module, [a.shape for a in spec.operands])
    rng = np.random.default_rng(level + 20)
    ran = [same_as_full(program, random_inputs(spec, rng, edge)) for edge in
           [None, *EDGE_CASES]]
    if any(k in case for k in MUST_RUN) and "sgd" not in case:
        assert all(ran), f"{case} -O{level}: the addresses mode refused it"


def test_handwritten_and_compiled_bags_run_in_the_addresses_mode():
    from ember_xla.dae_target.passes.levels import run_stages

    rng = np.random.default_rng(4)
    for lengths, rows, dim in (([3, 0, 5, 1], 20, 13), ([0, 0], 4, 8), ([9], 3, 16),
                               ([1, 2], 9, 128)):
        inputs = slc_examples.bag_inputs(rng, lengths, rows, dim)
        shape = [(len(lengths), dim)]
        for level in range(5):
            compiled = run_stages(slc_examples.embedding_bag(), level)[-1][1]
            assert same_as_full(emit_program(compiled, output_shapes=shape), inputs, shape)
        assert same_as_full(emit_program(sum_bag_dlc(vl=8)), inputs, shape)


def _backward_programs(level: int, sgd: bool = False):
    """The scatter_grad and sparse_sgd programs of a flax-style training step (the backward
    lowering's own test steps, tests/rewrites/training_steps.py) at ``-O<level>``."""
    import sys
    from pathlib import Path

    from ember_xla.call_specs import cluster_spec, ember_calls
    from ember_xla.dae_target.passes.levels import lower_cluster
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
    import training_steps as ts

    rng = np.random.default_rng(0)
    w = ts.head(rng)
    ids = rng.integers(0, ts.V, (ts.B, ts.P)).astype(np.int32)
    y = rng.standard_normal(ts.B).astype(np.float32)
    step = ts.sgd_step(ts.bag_take(w), 0.1) if sgd else ts.grad_fn(ts.bag_take(w))
    module = rewrite_for(from_jax(step, ts.table(rng), ids, y).module, "dae").module
    out = {}
    for call in ember_calls(module):
        spec = cluster_spec(call)
        if spec.kind in ("scatter_grad", "sparse_sgd"):
            out[spec.kind] = (emit_program(lower_cluster(spec, level)[-1][1],
                                           [a.shape for a in spec.operands]), spec)
    return out


@pytest.mark.parametrize("level", [0, 3])
def test_backward_scatter_runs_in_the_addresses_mode(level):
    progs = _backward_programs(level)
    assert "scatter_grad" in progs, "no scatter_grad cluster in the training step"
    program, spec = progs["scatter_grad"]
    rng = np.random.default_rng(level)
    for edge in [None, *EDGE_CASES]:
        assert same_as_full(program, random_inputs(spec, rng, edge))


@pytest.mark.parametrize("level", [0, 3])
def test_fused_sgd_update_agrees_or_is_refused(level):
    """The fused SGD update tests a per-row flag the core writes (the read-modify-write rule
    of duplicate ids): never computed in the addresses mode, so the run must refuse with the
    reason (or, if it runs, agree with the full mode)."""
    progs = _backward_programs(level, sgd=True)
    assert "sparse_sgd" in progs, "no sparse_sgd cluster in the SGD step"
    program, spec = progs["sparse_sgd"]
    inputs = random_inputs(spec, np.random.default_rng(level), None)
    if not same_as_full(program, inputs):
        with pytest.raises(AddressesUnsupported, match="depends on data"):
            run_program_fast(program, inputs, mode="addresses")


def _bag_with_carried_register() -> str:
    """The -O3 sum bag with a register carried across its row callback's loop iterations and
    firings: each iteration branches on r24 (an extra op when nonzero) before writing it, and
    each bag's end resets it. So a firing's op count depends on r24 at the firing's start (0 at
    a bag's first row, the last column otherwise): r24 is live-in though the loop body writes
    it, and the firing after a reset must not be replayed from the one before."""
    from ember_xla.dae import to_text

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from bench_emulator import bag_program

    lines = to_text(bag_program(3, 24)).splitlines()
    out = []
    for ln in lines:
        f = ln.split()
        if f[:2] == ["program", "bag"]:
            ln = " ".join(f[:5] + [str(int(f[5]) + 2)] + f[6:])
        elif f[:2] == ["reg", "23"]:
            ln += "\nreg 24 s index 0\nreg 25 s f32 0"
        elif f[:2] == ["case", "1"]:
            ln = f"case 1 {int(f[2]) + 4}"
        elif f[0] == "for" and f[4] == "18":
            ln = " ".join(f[:-1] + [str(int(f[-1]) + 4)])
        elif f[0] == "vmask" and f[4] == "19":
            ln += "\nif 0 1 2 24 2 0\nconst 1 0 1 25 1.0\naddf 1 2 0 25 25 25\nmov 1 1 0 24 18"
        elif f[:2] == ["case", "2"]:
            ln = "case 2 2\nconst 1 0 1 24 0"
        elif f[0] == "code":
            ln = f"code {int(f[1]) + 1}\nconst 1 0 1 24 0"
        out.append(ln)
    return "\n".join(out) + "\n"


def test_a_register_carried_across_firings_keeps_replays_exact():
    text = _bag_with_carried_register()
    inputs = slc_examples.bag_inputs(np.random.default_rng(7), [3, 1, 4, 2, 2], 30, 24)
    shape = [(5, 24)]
    assert same_as_full(text, inputs, shape)
    _, tr = run_program_fast(text, inputs, shape)
    assert any(v != int(v) for v in tr.cases[1].ops.values())  # the firings' counts differ
