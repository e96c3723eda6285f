"""``hoist``: loop-invariant computations move out of their loops (beyond Ember).

- Access side: an ``slc.alu_stream`` or ``slc.to_stream`` in an ``slc.for``/``slcv.for`` body
  whose operands all come from outside the loop is computed once before the loop instead of
  once per iteration (fewer ``slc.alu`` evaluations).
- Core side: inside callbacks, a pure ``arith`` op, ``vector.broadcast`` or ``slc.from_stream``
  in an ``scf.for`` body whose operands come from outside that loop moves before it (e.g. the
  zero vector, the broadcast weight and the output row of a bufferized row callback).
Applied until nothing moves, so chains and nests hoist as far as they can. Loads are not
hoisted: a loop may run zero times, and hoisting a load would then read memory the program
never read (an ``slc.mem_stream`` or ``memref.load`` that is invariant is reported and left)."""

from __future__ import annotations

from typing import ClassVar

from ember_xla.dae_target.passes.pattern_pass import ReportingPatternPass
from ember_xla.dae_target.passes.slcv_util import PassReport, defined_inside
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.traits import Pure

ACCESS_LOOPS = ("slc.for", "slcv.for")
ACCESS_OPS = ("slc.alu_stream", "slc.to_stream")
CORE_OPS = ("vector.broadcast", "slc.from_stream")
LOADS = ("slc.mem_stream", "memref.load")


def _core_hoistable(op: Operation) -> bool:
    return op.opcode in CORE_OPS or (op.opcode.startswith("arith.") and op.has_trait(Pure))


class HoistInvariants(RewritePattern):
    def __init__(self, report: PassReport) -> None:
        self.report = report

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        loop = op.parent_op
        if loop is None or op.regions:
            return
        if loop.opcode in ACCESS_LOOPS:
            movable = op.opcode in ACCESS_OPS
        elif loop.opcode == "scf.for":
            movable = _core_hoistable(op)
        else:
            return
        if not (movable or op.opcode in LOADS):
            return
        if any(defined_inside(v, loop) for v in op.operands):
            return
        if not movable:
            self.report.refuse(f"invariant {op.opcode} in {loop.opcode} (a load)")
            return
        rw.move_before(op, loop)
        self.report.change(f"{op.opcode} out of {loop.opcode}")


@register_pass
class Hoist(ReportingPatternPass):
    """Loop-invariant stream and core computations out of their loops."""

    name: ClassVar[str] = "hoist"
    pattern = HoistInvariants
