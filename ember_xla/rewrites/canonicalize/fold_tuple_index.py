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
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass


def _indexed(op: Operation, through_barrier: bool) -> tuple[Operation, Value] | None:
    """(the tuple, its operand) that ``get-tuple-element`` ``op`` reads: of a ``tuple``, or
    with ``through_barrier`` of an ``opt-barrier`` of a tuple; None when ``op`` is not that,
    is its graph's root, or the operand's type is not ``op``'s."""
    if op.opcode != "get-tuple-element" or len(op.operands) != 1 or \
            op is getattr(op.parent, "root", None):
        return None
    src = op.operands[0].owner
    if through_barrier:
        if src.opcode != "opt-barrier" or len(src.operands) != 1:
            return None
        src = src.operands[0].owner
    index = op.attributes.get("tuple_index", 0)
    if src.opcode != "tuple" or not 0 <= index < len(src.operands) or \
            src.operands[index].type != op.result.type:
        return None
    return src, src.operands[index]


class FoldTupleIndex(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        found = _indexed(op, through_barrier=False)
        if found is None:
            return
        tup, value = found
        rw.replace_op(op, value)
        if tup is not getattr(tup.parent, "root", None) and not any(r.uses for r in tup.results):
            rw.erase(tup)


_INTEGER = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


class IntegerThroughBarrier(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        found = _indexed(op, through_barrier=True)
        if found is not None and found[1].type.is_array and \
                found[1].type.element_type in _INTEGER:
            rw.replace_op(op, found[1])


@register_pass
class FoldTupleIndexPass(PatternPass):
    name = "fold-tuple-index"
    rewrites = (FoldTupleIndex, IntegerThroughBarrier)
