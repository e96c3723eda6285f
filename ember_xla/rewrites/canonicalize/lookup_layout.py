"""``lookup-layout``: reshapes and transposes of looked-up rows that only rearrange the lookups
(the row dim D stays last and whole) are moved onto the indices, and a bag reduced over a
leading axis is turned into one reduced over axis 1 -- batched and time-major lookups:

    reshape(gather(T, i) [L,D]) [B,P,D]       => gather(T, reshape(i) [B,P,1])
    transpose(gather(T, i) [..,D], perm)       => gather(T, transpose(i, perm'))   (perm[-1] last)
    reduce(gather(T, i) [P,B,D], dims={0})     => reduce(gather(T, transpose(i)) [B,P,D], {1})

A gather of whole rows maps index ``k`` to row ``T[clamp(i[k])]`` independently for every
lookup, so permuting or regrouping the lookups before or after it gives the same values.
"""

from __future__ import annotations

import dataclasses

from ember_xla.ir.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit


def row_gather(v: Value) -> Operation | None:
    """``v``'s op if it is a canonical whole-row gather of a [N,D] table used only here."""
    g = v.owner
    if g is None or g.opcode != "gather" or len(v.uses) != 1:
        return None
    table, idx = g.operands
    if table.type.rank != 2:
        return None
    dn = g.attributes.get("gather_dimension_numbers", {})
    r = g.result.type.rank - 1
    ivd = dn.get("index_vector_dim", 0)
    trailing_one = ivd == idx.type.rank - 1 and idx.type.dims[-1] == 1
    if not (ivd == idx.type.rank or trailing_one) or ivd != r:
        return None
    if (dn.get("collapsed_slice_dims") != [0] or dn.get("start_index_map") != [0]
            or dn.get("offset_dims") != [r] or dn.get("operand_batching_dims")
            or g.attributes.get("gather_slice_sizes") != [1, table.type.dims[1]]):
        return None
    return g


def regather(emit: Emit, g: Operation, lookup_idx: Value, name: str = "") -> Value:
    """``gather(T, lookup_idx[..., 1])`` with ``g``'s attributes, for new lookup dims."""
    table = g.operands[0]
    lead = tuple(lookup_idx.type.dims)
    r = len(lead)
    idx = emit.reshape(lookup_idx, lead + (1,))
    attrs = {k: v for k, v in g.attributes.items() if k != "gather_dimension_numbers"}
    attrs["gather_dimension_numbers"] = {"offset_dims": [r], "collapsed_slice_dims": [0],
                                         "start_index_map": [0], "index_vector_dim": r}
    d = table.type.dims[1]
    return emit.op("gather", [table, idx], Shape.array(g.result.type.element_type, lead + (d,)),
                   attrs, name=name or g.name)


def lookup_indices(emit: Emit, g: Operation) -> Value:
    """The gather's indices as one value per lookup (without a trailing 1)."""
    lead = tuple(g.result.type.dims[:-1])
    return emit.reshape(g.operands[1], lead)


class ReshapeOfGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode not in ("reshape", "bitcast"):
            return
        g = row_gather(op.operands[0])
        out = op.result.type
        if g is None or out.rank < 2 or out.dims[-1] != g.result.type.dims[-1]:
            return
        emit = Emit(rw, op)
        ids = emit.reshape(lookup_indices(emit, g), tuple(out.dims[:-1]))
        rw.replace_op(op, regather(emit, g, ids))


class TransposeOfGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "transpose":
            return
        g = row_gather(op.operands[0])
        perm = op.attributes.get("dimensions", [])
        if g is None or not perm or perm[-1] != len(perm) - 1:
            return
        emit = Emit(rw, op)
        ids = lookup_indices(emit, g)
        lead = tuple(ids.type.dims[k] for k in perm[:-1])
        t = emit.op("transpose", [ids], Shape.array(ids.type.element_type, lead),
                    {"dimensions": list(perm[:-1])})
        rw.replace_op(op, regather(emit, g, t))


class LeadingBagAxis(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        x = op.operands[0]
        if x.type.rank != 3 or op.attributes.get("dimensions") != [0]:
            return
        g = row_gather(x)
        if g is None:
            return
        emit = Emit(rw, op)
        ids = lookup_indices(emit, g)                                  # [P,B]
        p, b = ids.type.dims
        t = emit.op("transpose", [ids], Shape.array(ids.type.element_type, (b, p)),
                    {"dimensions": [1, 0]})
        rows = regather(emit, g, t)                                    # [B,P,D]
        new = op.clone([rows, op.operands[1]])
        new.attributes["dimensions"] = [1]
        rw.insert_before(op, new)
        rw.replace_op(op, new.result)


@register_pass
@dataclasses.dataclass(frozen=True)
class LookupLayoutPass(PatternPass):
    name = "lookup-layout"

    def patterns(self) -> list[RewritePattern]:
        return [ReshapeOfGather(), TransposeOfGather(), LeadingBagAxis()]
