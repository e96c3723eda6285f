"""``fold-noops``: drop identity ``transpose``s and same-type ``convert``s/``copy``s (TF's einsum
and reduce_sum emit them between a lookup and its reduction)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass


class FoldNoop(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if (len(op.operands) != 1 or len(op.results) != 1
                or op is getattr(op.parent, "root", None)):
            return
        src = op.operands[0]
        same = src.type.element_type == op.result.type.element_type and (
            src.type.dims == op.result.type.dims)
        if not same:
            return
        if op.opcode == "transpose":
            if op.attributes.get("dimensions", []) != list(range(src.type.rank)):
                return
        elif op.opcode not in ("convert", "copy"):
            return
        rw.replace_op(op, src)


@register_pass
class FoldNoops(PatternPass):
    name = "fold-noops"
    rewrites = (FoldNoop,)
