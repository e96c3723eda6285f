"""``fold-tuple-index``: ``get-tuple-element(tuple(a, b, ...), index=i)`` -> the i-th operand.
JAX's JVP-wrapped calls (``jvp_jit__take__``) return their primal output and their residuals
(the lookup's indices) as one tuple; once ``inline-calls`` has inlined them, this pass lets
the forward lookup and the backward scatter see the gather and the indices they read.
``jax.checkpoint`` (remat) passes the backward's residuals through an optimization barrier,
``get-tuple-element(opt-barrier(tuple(..., ids, ...)), index=i)``: an integer array read
through the barrier is the barrier's operand (the barrier is the identity, and integer index
arithmetic computes the same bits in any fusion), so the recomputed lookup's scatter sees the
ids the forward reads. Float values keep their barrier (freed from it, they could fuse, and
contract, otherwise)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass


class FoldTupleIndex(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "get-tuple-element" or len(op.operands) != 1:
            return
        tup = op.operands[0].owner
        if tup.opcode != "tuple" or op is getattr(op.parent, "root", None):
            return
        index = op.attributes.get("tuple_index", 0)
        if not 0 <= index < len(tup.operands) or tup.operands[index].type != op.result.type:
            return
        rw.replace_op(op, tup.operands[index])
        if tup is not getattr(tup.parent, "root", None) and not any(r.uses for r in tup.results):
            rw.erase(tup)


_INTEGER = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


class IntegerThroughBarrier(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "get-tuple-element" or len(op.operands) != 1:
            return
        barrier = op.operands[0].owner
        if barrier.opcode != "opt-barrier" or len(barrier.operands) != 1 or \
                op is getattr(op.parent, "root", None):
            return
        tup = barrier.operands[0].owner
        index = op.attributes.get("tuple_index", 0)
        if tup.opcode != "tuple" or not 0 <= index < len(tup.operands):
            return
        value = tup.operands[index]
        if value.type != op.result.type or not value.type.is_array or \
                value.type.element_type not in _INTEGER:
            return
        rw.replace_op(op, value)


@register_pass
class FoldTupleIndexPass(PatternPass):
    name = "fold-tuple-index"
    rewrites = (FoldTupleIndex, IntegerThroughBarrier)
