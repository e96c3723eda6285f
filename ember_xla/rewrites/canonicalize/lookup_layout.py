"""``lookup-layout``: reshapes and transposes of looked-up rows that only rearrange the lookups
(the row dim D stays last and whole) are moved onto the indices, and a bag reduced over a
leading axis is turned into one reduced over axis 1 -- batched and time-major lookups:

    reshape(gather(T, i) [L,D]) [B,P,D]       => gather(T, reshape(i) [B,P,1])
    transpose(gather(T, i) [..,D], perm)       => gather(T, transpose(i, perm'))   (perm[-1] last)
    reduce(gather(T, i) [P,B,D], dims={0})     => reduce(gather(T, transpose(i)) [B,P,D], {1})

A gather of whole rows maps index ``k`` to row ``T[clamp(i[k])]`` independently for every
lookup, so permuting or regrouping the lookups before or after it gives the same values; the
same holds for ``jnp.take``'s fill (rebuilt for the new indices, lookups.py).
"""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import lookup_ids, relookup, row_lookup


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


class TransposeOfGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "transpose":
            return
        lk = row_lookup(op.operands[0])
        perm = op.attributes.get("dimensions", [])
        if lk is None or not perm or perm[-1] != len(perm) - 1:
            return
        emit = Emit(rw, op)
        ids = lookup_ids(emit, lk)
        lead = tuple(ids.type.dims[k] for k in perm[:-1])
        t = emit.op("transpose", [ids], Shape.array(ids.type.element_type, lead),
                    {"dimensions": list(perm[:-1])})
        rw.replace_op(op, relookup(emit, lk, t))


class LeadingBagAxis(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        x = op.operands[0]
        if x.type.rank != 3 or op.attributes.get("dimensions") != [0]:
            return
        lk = row_lookup(x)
        if lk is None:
            return
        emit = Emit(rw, op)
        ids = lookup_ids(emit, lk)                                     # [P,B]
        p, b = ids.type.dims
        t = emit.op("transpose", [ids], Shape.array(ids.type.element_type, (b, p)),
                    {"dimensions": [1, 0]})
        rows = relookup(emit, lk, t)                                   # [B,P,D]
        new = op.clone([rows, op.operands[1]])
        new.attributes["dimensions"] = [1]
        rw.insert_before(op, new)
        rw.replace_op(op, new.result)


@register_pass
class LookupLayoutPass(PatternPass):
    name = "lookup-layout"
    rewrites = (ReshapeOfGather, TransposeOfGather, LeadingBagAxis)
