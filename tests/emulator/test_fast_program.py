"""The C++ executor of DAE programs (``fast.run_program_fast`` / ``emulate_program``) against
the Python reference (``reference.run_program`` / ``emulate``): for every cluster kind the
emitter supports at -O0..-O4 and every edge case (random, duplicates, out-of-range / negative
ids, empty bags), the outputs bit for bit, the trace event for event with the same case costs,
and the same timing report on two targets; the hand-written bag; malformed programs and
programs that do not fit give errors, never a crash. ~40 s (lowering dominates)."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.dae import ProgramError, to_text
from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.dae_target.check import EDGE_CASES, random_inputs
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.program import emit_program
from ember_xla.emulator.executor_cc import emulate_program, run_program_fast
from ember_xla.emulator.reference import emulate, run_program
from ember_xla.ir.interpreter import InterpretError
from ember_xla.machines.config import load_target

TMU, TINY = load_target("tmu"), load_target("tiny")


dae_cases = load_helper("emulator/dae_cases.py")
CASES, dlc, slc_examples = dae_cases.CASES, dae_cases.dlc, dae_cases.slc_examples


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_run(program, inputs, shapes=None):
    want, t_ref = run_program(program, inputs, shapes)
    got, t_fast = run_program_fast(program, inputs, shapes)
    for w, g in zip(want, got, strict=True):
        assert bits_equal(w, g), f"outputs differ\n{w}\n{g}"
    dae_cases.assert_same_trace(t_fast, t_ref)
    dae_cases.assert_same_timing(lambda t: emulate(program, inputs, t, shapes)[1],
                                 lambda t: emulate_program(program, inputs, t, shapes)[1],
                                 (TMU, TINY))
    return t_ref


@pytest.mark.parametrize("level", range(5))
@pytest.mark.parametrize("case", CASES)
def test_equals_the_reference(case, level):
    try:
        module, spec = dlc(case, level)
    except ValueError as e:   # the rewrite makes no cluster of it in this build
        pytest.skip(f"{case}: no cluster to lower ({e})")
    program = emit_program(module, [a.shape for a in spec.operands])
    rng = np.random.default_rng(level + 10)
    for edge in [None, *EDGE_CASES]:
        inputs = random_inputs(spec, rng, edge)
        try:
            run_program(program, inputs)
        except InterpretError:
            with pytest.raises(InterpretError):
                run_program_fast(program, inputs)
            continue
        same_run(program, inputs)


def test_handwritten_bag_equals_the_reference():
    rng = np.random.default_rng(3)
    for lengths, rows, dim in (([3, 0, 5, 1], 20, 13), ([0, 0], 4, 8), ([9], 3, 16), ([], 2, 8)):
        inputs = slc_examples.bag_inputs(rng, lengths, rows, dim)
        shape = [(len(lengths), dim)]
        tr = same_run(emit_program(sum_bag_dlc(vl=8)), inputs, shape)
        assert tr.counts()["tokens"] == 2 * len(lengths) + sum(lengths)


def test_compiled_o3_bag_takes_the_hand_written_cycles():
    """The -O3 compilation of the O0 bag and the hand-written program: the same cycles on
    the C++ emulator (and the reference's), D a multiple of VL or not."""
    from ember_xla.dae_target.passes.levels import run_stages

    compiled = run_stages(slc_examples.embedding_bag(), 3)[-1][1]
    rng = np.random.default_rng(5)
    for lengths, rows, dim in (([3, 0, 5, 1], 20, 13), ([1, 2], 9, 128)):
        inputs = slc_examples.bag_inputs(rng, lengths, rows, dim)
        shape = [(len(lengths), dim)]
        (a,), r_c = emulate_program(emit_program(compiled, output_shapes=shape), inputs, TMU,
                                    shape)
        (b,), r_h = emulate_program(emit_program(sum_bag_dlc(vl=8)), inputs, TMU, shape)
        assert bits_equal(a, b) and r_c.cycles == r_h.cycles
        assert r_c == emulate(emit_program(compiled, output_shapes=shape), inputs, TMU,
                              shape)[1]


def test_program_text_is_accepted_as_well():
    program = emit_program(sum_bag_dlc(vl=4))
    inputs = slc_examples.bag_inputs(np.random.default_rng(0), [2, 1], 6, 4)
    (a,), _ = run_program_fast(program, inputs, [(2, 4)])
    (b,), _ = run_program_fast(to_text(program, one_line=True), inputs, [(2, 4)])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("text,match", [
    ("", "ends early"),
    ("ember-dae 2", "version"),
    ("ember-dae 1;program p - 0 0 0 0;code 1;mov 1 1 0 5 6;end", "out of range"),
    ("ember-dae 1;program p - 0 0 1 0;reg 0 s f32 0;code 1;frob 1 0 0 0;end", "unknown"),
    ("ember-dae 1;program p - 0 0 1 0;reg 0 s index 0;code 1;for 1 3 1 0 0 0 0 5;end",
     "runs past"),
    ("ember-dae 1;program p - 0 0 1 1;reg 0 s index 0;engine 0 1 1 0 0 0;"
     "tu 0 -1 0 0 0 0;stream 0 -1 reg index 0 0 1 7;code 0;end", "register"),
])
def test_malformed_programs_are_errors_not_crashes(text, match):
    with pytest.raises(ProgramError, match=match):
        run_program_fast(text, [])


def test_run_time_errors_are_errors_not_crashes():
    # a for with step 0 and a read of an unwritten register
    for text, match in (
            ("ember-dae 1;program p - 0 0 2 0;reg 0 s index 0;reg 1 s index 0;code 2;"
             "const 1 0 1 0 0;for 1 3 1 1 0 0 0 0;end", "step"),
            ("ember-dae 1;program p - 0 0 2 0;reg 0 s f32 0;reg 1 s f32 0;code 1;"
             "addf 1 2 0 0 1 1;end", "read before")):
        with pytest.raises(InterpretError, match=match):
            run_program_fast(text, [])


def test_program_that_does_not_fit_is_refused():
    program = emit_program(sum_bag_dlc(vl=8))
    inputs = slc_examples.bag_inputs(np.random.default_rng(0), [2, 1], 6, 64)
    small = dc.replace(TMU, access=dc.replace(TMU.access, data_queue_bytes=8))
    with pytest.raises(ProgramDoesNotFit, match="does not fit"):
        emulate_program(program, inputs, small, [(2, 64)])


@pytest.mark.parametrize("text,match", [
    # a for bound never written, a vector operand with too few lanes, a buffer as a scalar
    ("ember-dae 1;program p - 0 0 2 0;reg 0 s index 0;reg 1 s index 0;code 1;"
     "for 1 3 1 0 1 1 1 0;end", "not a scalar"),
    ("ember-dae 1;program p - 0 0 3 0;reg 0 v f32 4;reg 1 v f32 8;reg 2 v f32 8;code 3;"
     "const 1 0 1 0 1.0;const 1 0 1 1 2.0;addf 1 2 0 2 0 1;end", "lanes"),
    ("ember-dae 1;program p - 0 1 2 0;arg 0 o out 0 f32 1 4;reg 0 m f32 1;reg 1 s f32 0;"
     "code 1;addf 1 2 0 1 0 0;end", "buffer"),
])
def test_ill_typed_programs_are_errors_not_crashes(text, match):
    with pytest.raises(InterpretError, match=match):
        run_program_fast(text, [])
