"""Every cluster kind and edge case (small shapes): the native kernel, the DLC interpreter, the
emulator (Python reference, at -O0 and -O3, its trace timed by the Python model and the C++
core with equal reports) and the original
computation on XLA:CPU give the same outputs — bit for bit, except the original where XLA's
own arithmetic is not the contract's (``check.exact_vs_xla``: sqrt_n, padded bags; there the
tolerance of ``check.compare``). Cases: tests/dae_target/pass_cases.py (segment reductions,
padded and offsets bags, grouped; f32/bf16/f16; clip/fill, wrap, weights) x (random,
duplicate ids, out-of-range ids, empty bags). Cost: ~15 s."""

from __future__ import annotations

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae_target.check import (
    EDGE_CASES,
    compare,
    exact_vs_xla,
    kernel_reference,
    outlined_module,
    random_inputs,
)
from ember_xla.dae_target.interp.run import run as interpret
from ember_xla.emulator.reference import run_program
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import simulate_fast
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.compile_clusters import compile_cluster
from ember_xla.runtime.execute import run_module


def _pass_cases():
    load_helper("dae_target/lowering_cases.py")  # pass_cases imports it by name
    return load_helper("dae_target/pass_cases.py")


PC = _pass_cases()
#: the pass tests' cases and the emulator's own (the fused updates, the ordered scatter)
CASES = load_helper("emulator/dae_cases.py").ALL_CASES
TMU = load_target("tmu")


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return compare(np.asarray(a), np.asarray(b), True)[1] is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_emulated_interpreted_and_original_agree(name):
    fn, args = CASES[name]()
    module = PC.rewritten(fn, args)
    (call,) = ember_calls(module)
    spec = cluster_spec(call)
    compiled = {lv: compile_cluster(0, call, TMU, lv) for lv in (0, 3)}
    assert all(c.refused is None for c in compiled.values()), compiled
    native = kernel_reference(spec)
    original = outlined_module(module, call) if call.callees else None
    rng = np.random.default_rng(7)
    for case in [None, *EDGE_CASES]:
        inputs = random_inputs(spec, rng, case)
        want = native(inputs)
        got_interp = interpret(compiled[3].dlc, inputs)
        for k, w in enumerate(want):
            assert same_bits(w, got_interp[k]), (case, "interpreter", k)
        for lv, c in compiled.items():
            got, trace = run_program(c.program, inputs)
            timing = simulate(TMU, trace)
            assert simulate_fast(TMU, trace) == timing, (case, lv)   # C++ core, same report
            assert timing.tokens == trace.counts()["tokens"]
            for k, w in enumerate(want):
                assert same_bits(w, got[k]), (case, f"emulator -O{lv}", k)
        if original is not None:
            ref = run_module(original, inputs)
            for k, w in enumerate(want):
                md, fail = compare(np.asarray(ref[k]), np.asarray(w), exact_vs_xla(spec))
                assert fail is None, (case, "original", k, fail)
