"""Row lookups as canonicalization passes see them, and how to redo one for other lookup
dims: a whole-row ``gather`` of a [N,D] table, optionally wrapped in ``jnp.take``'s
out-of-bounds fill ``select(in_bounds(idx), gather(T, idx), NaN)`` (the chain the lookup
matcher models, rebuilt here in exactly that form for the new indices)."""

from __future__ import annotations

import dataclasses
import math

from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Graph
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant


@dataclasses.dataclass
class RowLookup:
    value: Value                 # the rows [..., D]
    gather: Operation
    fill_and: Graph | None       # the and-computation of the fill's in-bounds reduce

    @property
    def lead(self) -> tuple[int, ...]:
        return tuple(self.value.type.dims[:-1])


def is_row_gather(g: Operation) -> bool:
    """A whole-row gather of a [N,D] table at ids [lead...] or [lead..., 1] -> [lead..., D]."""
    if g.opcode != "gather":
        return False
    table, idx = g.operands
    if table.type.rank != 2:
        return False
    dn = g.attributes.get("gather_dimension_numbers", {})
    r = g.result.type.rank - 1
    ivd = dn.get("index_vector_dim", 0)
    trailing_one = ivd == idx.type.rank - 1 and idx.type.dims[-1] == 1
    return ((ivd == idx.type.rank or trailing_one) and ivd == r
            and dn.get("collapsed_slice_dims") == [0] and dn.get("start_index_map") == [0]
            and dn.get("offset_dims") == [r] and not dn.get("operand_batching_dims")
            and g.attributes.get("gather_slice_sizes") == [1, table.type.dims[1]])


def fill_and(sel: Operation, g: Operation, n: int | None = None) -> Graph | None:
    """The and-computation if ``sel`` is jnp.take's fill around ``g`` (ids tested against
    [0, n-1], by default the table's rows), else None."""
    fill = scalar_constant(Ref(sel.operands[2]))
    if fill is None or not math.isnan(fill) or sel.operands[1].owner is not g:
        return None
    p = sel.operands[0].owner
    if p.opcode in ("broadcast", "reshape"):
        p = p.operands[0].owner
    if p.opcode != "reduce" or binary_combiner(p) != "and":
        return None
    if scalar_constant(Ref(p.operands[1])) != 1.0:
        return None
    a = p.operands[0].owner
    if a.opcode != "and":
        return None
    n = g.operands[0].type.dims[0] if n is None else n
    bounds = {}
    for v in a.operands:
        c = v.owner
        if c.opcode != "compare" or c.operands[0] is not g.operands[1]:
            return None
        bounds[c.attributes.get("comparison_direction")] = scalar_constant(Ref(c.operands[1]))
    return p.callees[0] if bounds == {"GE": 0.0, "LE": float(n - 1)} else None


def row_lookup(v: Value, shared: bool = False) -> RowLookup | None:
    """``v`` as a row lookup (plain gather, or jnp.take's fill select) used only once, or
    also by others with ``shared``."""
    op = v.owner
    if op is None or (len(v.uses) != 1 and not shared):
        return None
    if is_row_gather(op):
        return RowLookup(v, op, None)
    if op.opcode == "select" and len(op.operands) == 3:
        g = op.operands[1].owner
        if is_row_gather(g) and len(g.result.uses) == 1:
            cb = fill_and(op, g)
            if cb is not None:
                return RowLookup(v, g, cb)
    return None


def lookup_ids(emit: Emit, lk: RowLookup) -> Value:
    """The lookup's indices, one per lookup (no trailing 1)."""
    return emit.reshape(lk.gather.operands[1], lk.lead)


def relookup(emit: Emit, lk: RowLookup, ids: Value) -> Value:
    """The same lookup (same table, attributes and fill) for indices ``ids`` [lead']."""
    g = lk.gather
    idx = emit.reshape(ids, tuple(ids.type.dims) + (1,))
    rows = row_gather(emit, g.operands[0], idx, g)
    return rows if lk.fill_and is None else with_fill(emit, rows, lk.fill_and)


def row_gather(emit: Emit, table: Value, idx: Value, like: Operation | None,
               name: str = "") -> Value:
    """The canonical whole-row gather ``table [N,D]`` at ``idx [lead..., 1]`` -> ``[lead...,
    D]``, with ``like``'s other attributes (sortedness ...) and name (without ``like``: none,
    and ``name``)."""
    d = table.type.dims[1]
    lead = tuple(idx.type.dims[:-1])
    r = len(lead)
    attrs = {k: v for k, v in (like.attributes if like is not None else {}).items()
             if k not in ("gather_dimension_numbers", "gather_slice_sizes")}
    attrs["gather_dimension_numbers"] = {"offset_dims": [r], "collapsed_slice_dims": [0],
                                         "start_index_map": [0], "index_vector_dim": r}
    attrs["gather_slice_sizes"] = [1, d]
    return emit.op("gather", [table, idx], Shape.array(table.type.element_type, lead + (d,)),
                   attrs, name=like.name if like is not None else name)


def in_bounds(emit: Emit, idx: Value, n: int) -> Value:
    """``0 <= i <= N-1`` for each id ``i`` of ``idx`` (pred, ``idx``'s shape): jnp.take's
    in-bounds test, as ``fill_and`` and ``forward_lookup`` read it back."""
    et, dims = idx.type.element_type, tuple(idx.type.dims)
    ge = emit.compare(idx, emit.splat(0, et, dims), "GE")
    le = emit.compare(idx, emit.splat(n - 1, et, dims), "LE")
    return emit.op("and", [ge, le], Shape.array("pred", dims))


def rows_at(emit: Emit, idx: Value, n: int, base: Value, keep_out: bool = False) -> Value:
    """The row ``clamp(0, i, N-1) + base`` of a bigger table for each id ``i`` of an [N,D]
    table that starts at row ``base`` of it (``base``: the ids' shape). With ``keep_out``,
    ``select(0 <= i <= N-1, that row, -1)``: an id out of the small table stays out of the big
    one (jnp.take's fill, a scatter's dropped update). The kept form holds the plain one as
    its operand, so a lookup at one and a scatter at the other still read the same ids."""
    et, dims = idx.type.element_type, tuple(idx.type.dims)
    clamped = emit.op("clamp", [emit.splat(0, et, dims), idx, emit.splat(n - 1, et, dims)],
                      Shape.array(et, dims))
    flat = emit.op("add", [clamped, base], Shape.array(et, dims))
    if not keep_out:
        return flat
    return emit.op("select", [in_bounds(emit, idx, n), flat, emit.splat(-1, et, dims)],
                   Shape.array(et, dims))


def unclaimed(v: Value) -> Value:
    """``v`` (a gather or scatter) without claims on its ids (``indices_are_sorted``,
    ``unique_indices``): ``rows_at(keep_out=True)`` writes -1 for every id out of the small
    table, among sorted rows and as often as there are such ids."""
    v.owner.attributes.pop("indices_are_sorted", None)
    v.owner.attributes.pop("unique_indices", None)
    return v


def with_fill(emit: Emit, rows: Value, fill_and: Graph) -> Value:
    """jnp.take's fill around the row gather ``rows`` [lead..., D] of its ids [lead..., 1]:
    NaN rows where an id is out of the table (``fill_and``: the in-bounds reduce's and)."""
    g = rows.owner
    idx = g.operands[1]
    n, d = g.operands[0].type.dims
    lead = tuple(rows.type.dims[:-1])
    r = len(lead)
    et = rows.type.element_type
    okr = emit.op("reduce", [in_bounds(emit, idx, n), emit.constant(True, "pred")],
                  Shape.array("pred", lead),
                  {"dimensions": [r]}, callees=[fill_and])
    okb = emit.broadcast(okr, lead + (d,), list(range(r)))
    return emit.op("select", [okb, rows, emit.splat(float("nan"), et, lead + (d,))],
                   Shape.array(et, lead + (d,)), name="take.fill")
