"""``lookup-layout``: reshapes and transposes of looked-up rows that only rearrange the lookups
(the row dim D stays last and whole) are moved onto the indices, and a transpose right before
a sum is dropped -- batched and time-major lookups:

    reshape(gather(T, i) [L,D]) [B,P,D]       => gather(T, reshape(i) [B,P,1])
    slice(gather(T, i) [B,P,D]) [b,p,D]        => gather(T, slice(i) [b,p,1])   (D whole)
    transpose(gather(T, i) [..,D], perm)       => gather(T, transpose(i, perm'))   (perm[-1] last)
    reduce(transpose(gather(T, i), perm), {r}) => reduce(gather(T, i), {perm[r]})  (kept in order)

A gather of whole rows maps index ``k`` to row ``T[clamp(i[k])]`` independently for every
lookup, so permuting, regrouping or picking the lookups before or after it gives the same
values (a slice is taken, like the transpose, only on rows that reach a sum: one lookup read
by several slices -- ids of two features concatenated, the first positions of a sequence
pooled apart -- becomes one lookup per slice; in a training step ``forward_lookup`` still
pairs the lookup's gradient, a scatter at all the ids, with the gathers of their slices); the
same holds for ``jnp.take``'s fill (rebuilt for the new indices, lookups.py). Where the rows
must be added in XLA:CPU's order (``xla_order``: the CPU rewrite) a transpose of the rows that
changes their leading lookup axis is moved onto the ids only where XLA:CPU adds the rows in
the same order after the move (``padded_order.check_lookup_layout``); otherwise it keeps its
layout and the reason is noted. A bag summed over the leading lookup axis (time-major ids) is
``batched-bags``' to regroup.
"""

from __future__ import annotations

import dataclasses

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.native.padded_order import OrderNotReproduced, check_lookup_layout
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import lookup_ids, relookup, row_lookup
from ember_xla.rewrites.canonicalize.notes import note
from ember_xla.rewrites.row_reduction import dot_sums_lookups

PASS = "lookup-layout"


class ReshapeOfGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode not in ("reshape", "bitcast"):
            return
        lk = row_lookup(op.operands[0])
        out = op.result.type
        if lk is None or out.rank < 2 or out.dims[-1] != lk.value.type.dims[-1]:
            return
        emit = Emit(rw, op)
        ids = emit.reshape(lookup_ids(emit, lk), tuple(out.dims[:-1]))
        rw.replace_op(op, relookup(emit, lk, ids))


class SliceOfGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "slice":
            return
        lk = row_lookup(op.operands[0], shared=True)
        dims = op.attributes.get("slice_dimensions", [])
        if (lk is None or len(dims) != op.result.type.rank
                or op.result.type.dims[-1] != lk.value.type.dims[-1]
                or dims[-1].get("start", 0) != 0 or dims[-1].get("stride", 1) != 1
                or _summed(op) is None):
            return
        emit = Emit(rw, op)
        ids = lookup_ids(emit, lk)
        lead = tuple(op.result.type.dims[:-1])
        picked = emit.op("slice", [ids], Shape.array(ids.type.element_type, lead),
                         {"slice_dimensions": list(dims[:-1])})
        rw.replace_op(op, relookup(emit, lk, picked))


#: ops that carry looked-up rows on to a sum without summing them (``_summed``)
_CARRY = frozenset({"reshape", "bitcast", "convert", "copy", "multiply", "divide", "select",
                    "broadcast", "negate"})


def _summed(op: Operation, depth: int = 4) -> Operation | None:
    """The first reduce, or dot over the lookups, that ``op``'s values reach through a few ops
    that carry them (a time-major scan or a dense layer over the rows reaches none), or None."""
    frontier = [op]
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for u in o.result.users:
                if u.opcode == "reduce" or (u.opcode == "dot" and dot_sums_lookups(u, o)):
                    return u
                if u.opcode in _CARRY:
                    nxt.append(u)
        frontier = nxt
    return None


class TransposeOfGather(RewritePattern):
    def __init__(self, xla_order: bool = True) -> None:
        self.xla_order = xla_order

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "transpose":
            return
        lk = row_lookup(op.operands[0])
        perm = op.attributes.get("dimensions", [])
        if lk is None or not perm or perm[-1] != len(perm) - 1:
            return
        if self.xla_order and perm[0] != 0 and (red := _summed(op)) is not None:
            if all(_untransposed_dim(u) is not None for u in op.result.users):
                return  # ReduceOfTransposedRows drops the transpose
            try:
                check_lookup_layout(op.result.type.size,
                                    "a transpose that changes the rows' leading lookup axis")
            except OrderNotReproduced as e:
                note(PASS, red, f"transpose {op.name}: {e}")
                return
        emit = Emit(rw, op)
        ids = lookup_ids(emit, lk)
        lead = tuple(ids.type.dims[k] for k in perm[:-1])
        t = emit.op("transpose", [ids], Shape.array(ids.type.element_type, lead),
                    {"dimensions": list(perm[:-1])})
        rw.replace_op(op, relookup(emit, lk, t))


def _untransposed_dim(red: Operation) -> int | None:
    """For ``reduce(transpose(rows, perm), {r})`` of a row lookup used only by the transpose,
    itself used only by the reduce, whose kept dims keep their order: perm[r], the axis the
    same reduce has on the rows themselves. Else None."""
    if red.opcode != "reduce" or len(red.operands) != 2:
        return None
    tr = red.operands[0].owner
    dims = red.attributes.get("dimensions", [])
    if (not isinstance(tr, Operation) or tr.opcode != "transpose" or len(dims) != 1
            or len(tr.result.uses) != 1):
        return None
    perm = tr.attributes.get("dimensions", [])
    if row_lookup(tr.operands[0]) is None or not perm or perm[-1] != len(perm) - 1:
        return None
    kept = [perm[k] for k in range(len(perm)) if k != dims[0]]
    return perm[dims[0]] if kept == sorted(kept) else None


class ReduceOfTransposedRows(RewritePattern):
    """``reduce(transpose(rows, perm), {r})`` => ``reduce(rows, {perm[r]})``: the sum in the
    gather's own lookup order, the order XLA:CPU gives it."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or (r := _untransposed_dim(op)) is None:
            return
        tr = op.operands[0].owner
        new = op.clone([tr.operands[0], op.operands[1]])
        new.attributes["dimensions"] = [r]
        rw.insert_before(op, new)
        rw.replace_op(op, new.result)
        rw.erase(tr)


@register_pass
@dataclasses.dataclass(frozen=True)
class LookupLayoutPass(PatternPass):
    name = PASS
    xla_order: bool = True

    def patterns(self) -> list[RewritePattern]:
        return [ReshapeOfGather(), SliceOfGather(), ReduceOfTransposedRows(),
                TransposeOfGather(self.xla_order)]
