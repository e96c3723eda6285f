"""``scale-to-weights``: rows scaled by one scalar before their reduction
(``emb(ids) * sqrt(d)``, ``rows * alpha``) become rows times a per-lookup weight that is that
scalar broadcast to every lookup, so the weighted-bag kernels take them. The multiply is the
same, element for element: ``rows * broadcast(s)`` with ``s`` first broadcast to the lookup
dims. (Per-lookup weights ``rows * w[..., None]`` already are that form.)"""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit

_LOOKUPS = ("gather", "select")


def _scalar_source(v: Value) -> Value | None:
    op = v.owner
    if op.opcode == "broadcast" and op.operands[0].type.rank == 0:
        return op.operands[0]
    return None


class ScaleToWeights(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "multiply" or op.result.type.rank < 2:
            return
        a, b = op.operands
        for rows, sc in ((a, b), (b, a)):
            s = _scalar_source(sc)
            if s is None or rows.owner.opcode not in _LOOKUPS:
                continue
            dims = rows.type.dims
            lead = tuple(dims[:-1])
            emit = Emit(rw, op)
            per_lookup = emit.broadcast(s, lead, [])
            w = emit.broadcast(per_lookup, dims, list(range(len(lead))))
            new = emit.op("multiply", [rows, w], op.result.type, name=op.name)
            rw.replace_op(op, new)
            return


@register_pass
class ScaleToWeightsPass(PatternPass):
    name = "scale-to-weights"
    rewrites = (ScaleToWeights,)
