"""``simplify-mem``: a vector gather whose lanes read consecutive elements becomes one
contiguous vector load (Ember's SimplifyMemOps).

An ``slcv.mem_stream`` qualifies when its last index is the induction variable of the
``slcv.for`` it sits in (or that plus a broadcast scalar stream), that loop's step is the
constant 1 (so lane ``l`` reads element ``first + l``), and every other index is a scalar
(broadcast) stream. It gets
``contiguous = true``: the interpreter then loads the active lanes with one vector access
(``slcv.contiguous``) instead of a lane-wise gather (``slcv.gathers``); the values are the
same."""

from __future__ import annotations

from typing import ClassVar

from ember_xla.dae_target.dialects.slcv import stream_elem
from ember_xla.dae_target.passes.pattern_pass import ReportingPatternPass
from ember_xla.dae_target.passes.slcv_util import PassReport, constant_of
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.types import VectorType
from ember_xla.ir.value import OpResult


def sequential(op: Operation) -> bool:
    """Do the lanes of ``slcv.mem_stream`` ``op`` read consecutive elements?"""
    loop = op.parent_op
    if loop is None or loop.opcode != "slcv.for" or constant_of(loop.step) != 1:
        return False
    last = op.operands[-2]
    if last is not loop.iv:  # iv + a broadcast scalar is sequential too
        alu = last.owner if isinstance(last, OpResult) else None
        if alu is None or alu.opcode != "slcv.alu_stream" or alu.attributes.get("op") != "add":
            return False
        others = [v for v in alu.operands if v is not loop.iv]
        if len(others) != 1 or isinstance(stream_elem(others[0].type), VectorType):
            return False
    return not any(isinstance(stream_elem(v.type), VectorType) for v in op.operands[1:-2])


class ContiguousLoads(RewritePattern):
    def __init__(self, report: PassReport) -> None:
        self.report = report

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "slcv.mem_stream" or op.attributes.get("contiguous", False):
            return
        if not sequential(op):
            self.report.refuse(f"gather from a {op.operands[0].type}: lanes not sequential")
            return
        rw.set_attribute(op, "contiguous", True)
        self.report.change(f"gather from a {op.operands[0].type} -> contiguous vector load")


@register_pass
class SimplifyMem(ReportingPatternPass):
    """Sequential-index gathers -> contiguous vector loads."""

    name: ClassVar[str] = "simplify-mem"
    pattern = ContiguousLoads
