"""The DLC dialect's verifier and interpreter reject malformed programs with a clear message:
each case edits one line of the hand-written program's text."""

from __future__ import annotations

import numpy as np
import pytest
from slc_examples import bag_inputs, run_bag

from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.interpreter import InterpretError
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module

TEXT = print_module(sum_bag_dlc())


def reg(tu: str, s: str, event: str, elem: str) -> str:
    """A ``dlc.register_operand`` line of the generic text form."""
    return (f'"dlc.register_operand"({tu}, {s}) {{event = "{event}"}} : '
            f"(!dlc.tu, !slc.stream<{elem}>) -> ()")

CB_ROW = '"dlc.register_callback"(%19) {event = "end", id = 1} : (!dlc.tu) -> ()'
REG_ROW = reg("%19", "%22", "end", "vector<8xf32>")


def edited(old: str, new: str):
    assert old in TEXT, old
    return parse_module(TEXT.replace(old, new, 1))


BAD = [
    ('{event = "begin", id = 0}', '{event = "middle", id = 0}', "event must be one of"),
    ('"dlc.register_callback"(%16) {event = "begin", id = 0} : (!dlc.tu) -> ()',
     reg("%16", "%18", "begin", "i32"), "cannot be pushed at begin"),
    ('"dlc.register_callback"(%11) {event = "iter", id = 2} : (!dlc.tu) -> ()',
     reg("%11", "%17", "iter", "index"), "cannot be pushed at iter"),
    ('"dlc.new_tu"(%16, %7, %10, %8) {vl = 8}', '"dlc.new_tu"(%16, %7, %10, %8) {vl = 0}',
     "vl must be a positive integer"),
    ('"dlc.new_tu"(%16, %7, %10, %8)', '"dlc.new_tu"(%11, %7, %17, %8)', "does not enclose"),
    ('"dlc.increment_var"() {name = "row"}', '"dlc.increment_var"() {name = "col"}',
     "unknown core variable 'col'"),
    ('{cases = [0, 1, 2]', '{cases = [0, 1, 1]', "cases must be distinct"),
    ('"func.return"() : () -> ()',
     '%99 = "dlc.pop_operand"() : () -> f32\n    "func.return"() : () -> ()',
     "only be used inside a dlc.compute_loop"),
]


@pytest.mark.parametrize("old,new,msg", BAD, ids=[b[2] for b in BAD])
def test_verifier_rejects(old, new, msg):
    with pytest.raises(VerifyError, match=msg):
        verify_generic_module(edited(old, new))


def test_mask_only_on_vector_tus():
    m = edited('"dlc.get_mask"(%19)', '"dlc.get_mask"(%16)')
    with pytest.raises(VerifyError, match="only a vector TU"):
        verify_generic_module(m)


def test_compute_loop_follows_its_configuration():
    m = sum_bag_dlc()
    conf = next(op for op in m.entry.ops if op.opcode == "dlc.configure_access_engine")
    m.entry.detach(conf)
    m.entry.insert_before(m.entry.ops[-1], conf)
    with pytest.raises(VerifyError, match="directly"):
        verify_generic_module(m)


def _run(module):
    inputs = bag_inputs(np.random.default_rng(0), [2, 1], 5, 3)
    return run_bag(module, inputs)


RUNTIME = [
    # the operand registered after its token: the case finds the queue empty
    (REG_ROW + "\n      " + CB_ROW, CB_ROW + "\n      " + REG_ROW, "data queue is empty"),
    # an operand pushed after the last token (at the end of the bag TU): nobody pops it
    ('"dlc.register_callback"(%11) {event = "iter", id = 2}',
     reg("%11", "%9", "end", "index") + '\n      '
     '"dlc.register_callback"(%11) {event = "iter", id = 2}', "left in the data queue"),
    # a token without a case
    ('{event = "iter", id = 2}', '{event = "iter", id = 5}', "control token 5 has no case"),
]


@pytest.mark.parametrize("old,new,msg", RUNTIME, ids=[r[2] for r in RUNTIME])
def test_interpreter_rejects(old, new, msg):
    m = edited(old, new)
    verify_generic_module(m)
    with pytest.raises(InterpretError, match=msg):
        _run(m)


def test_pop_checks_the_entry_type():
    m = edited(REG_ROW, reg("%19", "%12", "end", "index"))
    verify_generic_module(m)
    with pytest.raises(InterpretError, match="the case expects memref<\\?xf32>"):
        _run(m)
