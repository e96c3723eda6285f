"""``fold-noops``: drop identity ``transpose``s and same-type ``convert``s/``copy``s (TF's einsum
and reduce_sum emit them between a lookup and its reduction), and multiplies by a splat of one
(keras-rs's ``EmbedReduce`` and ``DistributedEmbedding`` multiply the rows by ones when no
weights are given): ``x * 1`` is ``x``, which XLA's simplifier folds too, so the bag is an
unweighted one and is added in an unweighted bag's order."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.refs import Ref, scalar_constant


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


class FoldMultiplyByOne(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "multiply" or op is getattr(op.parent, "root", None):
            return
        for x, one in (op.operands, reversed(op.operands)):
            if x.type == op.result.type and scalar_constant(Ref(one)) == 1.0:
                rw.replace_op(op, x)
                return


@register_pass
class FoldNoops(PatternPass):
    name = "fold-noops"
    rewrites = (FoldNoop, FoldMultiplyByOne)
