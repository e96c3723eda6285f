"""``scale-to-weights``: rows scaled by a value that is the same along the row dim before
their reduction -- one scalar (``emb(ids) * sqrt(d)``, ``rows * alpha``) or one weight per
bag position (``rows * w[None, :, None]``, position-weighted pooling) -- become rows times
per-lookup weights: that value first broadcast to the lookup dims, then along the row dim,
so the weighted-bag kernels take them. The multiply is the same, element for element.
(Per-lookup weights ``rows * w[..., None]`` already are that form; a weight per bag,
``rows * w[:, None, None]``, is left alone: XLA:CPU factors it out of the sum.)"""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit

_LOOKUPS = ("gather", "select")


def _lead_source(v: Value) -> tuple[Value, list[int]] | None:
    """``broadcast(s)`` of one scalar, or of values that vary along the bag position (the dim
    before the row dim) but not along the row dim, and are not already one per lookup ->
    (s, the broadcast's dims). A weight per bag (constant along the position) is not taken:
    XLA:CPU factors it out of the sum, another order than per-lookup weights."""
    op = v.owner
    if op.opcode != "broadcast":
        return None
    dims = list(op.attributes.get("dimensions", []))
    last = v.type.rank - 1
    if dims and (last in dims or last - 1 not in dims or dims == list(range(last))):
        return None
    return op.operands[0], dims


class ScaleToWeights(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "multiply" or op.result.type.rank < 2:
            return
        a, b = op.operands
        for rows, sc in ((a, b), (b, a)):
            src = _lead_source(sc)
            if src is None or rows.owner.opcode not in _LOOKUPS:
                continue
            s, mapping = src
            dims = rows.type.dims
            lead = tuple(dims[:-1])
            emit = Emit(rw, op)
            per_lookup = emit.broadcast(s, lead, mapping)
            w = emit.broadcast(per_lookup, dims, list(range(len(lead))))
            new = emit.op("multiply", [rows, w], op.result.type, name=op.name)
            rw.replace_op(op, new)
            return


@register_pass
class ScaleToWeightsPass(PatternPass):
    name = "scale-to-weights"
    rewrites = (ScaleToWeights,)
