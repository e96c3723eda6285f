"""``batch-dot-to-multiply``: a ``dot`` that contracts nothing and whose one operand is all
batch dimensions is a product per element -- ``jax.experimental.sparse``'s BCOO product
``M @ T`` multiplies each stored value into its looked-up row this way:

    dot(w [L], rows [L, D]), lhs_batch_dims={0}, rhs_batch_dims={0}, no contracting dims
 => multiply(broadcast(w, [L, D], dimensions={0}), rows)

so the rows times per-lookup weights are a weighted lookup to the cluster patterns. XLA's own
simplifier rewrites the dot into this multiply (measured on jaxlib 0.10.2: the optimized module
holds ``multiply(broadcast(w), rows)``; bit-equal with Inf, NaN and signed-zero operands), so
the module computes the same bits. Operands keep their order; the batch dimensions must lead
the other operand in order, so the result has its shape; one element type, default
precision."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit


def _dims(dn: dict, key: str) -> list[int]:
    return [int(x) for x in dn.get(key, [])]


def elementwise_side(op: Operation) -> int | None:
    """The operand (0 lhs, 1 rhs) of ``op`` that is all batch dims when ``op`` is a dot that is
    an elementwise product broadcast along the other operand's trailing dims, else None."""
    if op.opcode != "dot" or len(op.operands) != 2:
        return None
    lhs, rhs = (v.type for v in op.operands)
    if not (lhs.is_array and rhs.is_array) or not (
            lhs.element_type == rhs.element_type == op.result.type.element_type):
        return None
    if op.attributes.get("precision_config", {}).get("operand_precision", []) not in (
            [], ["DEFAULT", "DEFAULT"]):
        return None
    dn = op.attributes.get("dot_dimension_numbers", {})
    if _dims(dn, "lhs_contracting_dimensions") or _dims(dn, "rhs_contracting_dimensions"):
        return None
    for side, small, big in ((0, lhs, rhs), (1, rhs, lhs)):
        k = small.rank
        mine = _dims(dn, ("lhs" if side == 0 else "rhs") + "_batch_dimensions")
        other = _dims(dn, ("rhs" if side == 0 else "lhs") + "_batch_dimensions")
        if (k and mine == list(range(k)) and other == list(range(k)) and big.rank > k
                and tuple(big.dims[:k]) == tuple(small.dims)
                and tuple(op.result.type.dims) == tuple(big.dims)):
            return side
    return None


class BatchDotToMultiply(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        side = elementwise_side(op)
        if side is None or op is getattr(op.parent, "root", None):
            return
        small, big = op.operands[side], op.operands[1 - side]
        emit = Emit(rw, op)
        wide = emit.broadcast(small, tuple(big.type.dims), list(range(small.type.rank)))
        md = op.attributes.get("metadata")
        product = emit.op("multiply", [wide, big] if side == 0 else [big, wide], op.result.type,
                          {"metadata": dict(md)} if md else {}, name=op.name)
        rw.replace_op(op, product)


@register_pass
class BatchDotToMultiplyPass(PatternPass):
    name = "batch-dot-to-multiply"
    rewrites = (BatchDotToMultiply,)
