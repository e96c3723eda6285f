"""The emitter refuses, with one ProgramError naming the op, what a DAE program cannot express;
the structure it emits for the hand-written bag is the documented one (docs/DAE_PROGRAM.md).
~1 s."""

from __future__ import annotations

import pytest
from pass_cases import lowered

from ember_xla.dae import ProgramError
from ember_xla.dae_target.dialects import dlc
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.dae_target.program import emit_program
from ember_xla.ir.types import F32, MemRefType


def test_handwritten_structure():
    p = emit_program(sum_bag_dlc(), output_shapes=[(4, 8)])
    assert [a.role for a in p.args] == ["in", "in", "in", "out"]
    assert [a.name for a in p.args] == ["offsets", "ids", "table", "out"]
    assert p.args[3].shape == (4, 8) and p.args[2].shape == (-1, -1)
    (e,) = p.engines
    assert [(t.parent, t.vl) for t in e.tus] == [(-1, 0), (0, 0), (1, 8)]
    assert [(r.tu, r.event, r.what) for r in e.registrations] == [
        (1, "begin", "token"), (2, "end", "buffer"), (2, "end", "token"), (0, "iter", "token")]
    kinds = [s.kind for s in e.streams]
    assert kinds.count("mem") == 3 and kinds.count("vmem") == 1
    assert [v.name for v in e.vars] == ["row"] and [c.id for c in e.cases] == [0, 1, 2]
    assert [i.op for i in e.case(2).code] == ["inc"]
    assert [i.op for i in p.code][-1] == "run"


def test_refuses_a_module_above_dlc():
    _, spec = lowered("offsets_sum_fill_wrap")
    slc = lower_cluster(spec, 0)[0][1]
    with pytest.raises(ProgramError, match="slc.for.*not expressible in a DAE program"):
        emit_program(slc)


def test_refuses_a_pop_inside_a_loop():
    m = sum_bag_dlc()
    loop = next(op for op in m.walk() if op.opcode == "dlc.compute_loop")
    sfor = next(op for op in loop.regions[1].block.ops if op.opcode == "scf.for")
    sfor.body.insert(0, dlc.PopOperandOp.create([], [MemRefType((None,), F32)]))
    with pytest.raises(ProgramError, match="pops must be at the top level of a case"):
        emit_program(m)


def test_refuses_what_is_not_a_lowered_cluster():
    m = sum_bag_dlc()
    del m.entry.attributes["num_inputs"]
    with pytest.raises(ProgramError, match="not a lowered cluster"):
        emit_program(m)
    with pytest.raises(ProgramError, match="2 input shapes for 3 inputs"):
        emit_program(sum_bag_dlc(), input_shapes=[(1,), (2,)])
