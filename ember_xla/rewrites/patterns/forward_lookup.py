"""The forward lookup a scatter's ids come from: a row gather of a table of the scatter's shape
reading the same ids (or the ids a clip-mode clamp clamps, or the ids a select keeps in
bounds, or ids ``same_value.py`` proves equal), and whether a value depends on an op (a
"lookup" computed from the scatter itself is a forward segment sum, not a gradient)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.refs import Ref, scalar_constant, unclamped
from ember_xla.rewrites.same_value import same_elements


def _kept(ids: Value) -> Value | None:
    """x if ``ids`` is ``select(0 <= i <= c, x, -1)``: x where an id i is in bounds, elsewhere
    -1, out of every table, so its update is dropped (``stacked-tables`` writes a stacked
    scatter's ids so: x its lookup's flat ids, i the id in its own table)."""
    op = ids.owner
    if op.opcode != "select" or scalar_constant(Ref(op.operands[2])) != -1:
        return None
    ok = op.operands[0].owner
    if ok.opcode != "and":
        return None
    tests = {c.owner.attributes.get("comparison_direction"): c.owner for c in ok.operands
             if c.owner.opcode == "compare"}
    if set(tests) != {"GE", "LE"} or tests["GE"].operands[0] is not tests["LE"].operands[0] \
            or scalar_constant(Ref(tests["GE"].operands[1])) != 0:
        return None
    return op.operands[1]


def _table_gather(u: Operation, table_dims: tuple[int, ...]) -> bool:
    """Is ``u`` a gather of whole rows of a table of shape ``table_dims``?"""
    return (u.opcode == "gather" and tuple(u.operands[0].type.dims) == table_dims
            and u.attributes.get("gather_dimension_numbers", {}).get(
                "collapsed_slice_dims", []) == [0]
            and list(u.attributes.get("gather_slice_sizes", [])) == [1, table_dims[1]])


def row_gathers(ids: Value, table_dims: tuple[int, ...]) -> list[Operation]:
    """The row gathers of tables of shape ``table_dims`` in ``ids``' computation."""
    return [u for u in ids.owner.parent.ops if _table_gather(u, table_dims)]


def forward_gather(ids: Value, table_dims: tuple[int, ...]) -> Operation | None:
    """A row gather reading ``ids`` (or the ids a clip-mode clamp clamps, or a select keeps in
    bounds) as its indices from a table of shape ``table_dims``: the same value, or provably
    the same ids in the same order
    (``same_elements``: the index arithmetic written again, reshaped, converted there and
    back), as a hand-built gradient ``jnp.zeros_like(t).at[ids].add(rows)`` reads them."""
    for raw in (unclamped(ids, table_dims[0]), _kept(ids)):
        found = None if raw is None else forward_gather(raw, table_dims)
        if found is not None:
            return found
    for u in ids.owner.users:
        if _table_gather(u, table_dims) and u.operands[1] is ids:
            return u
    for u in row_gathers(ids, table_dims):
        if same_elements(u.operands[1], ids):
            return u
    return None


def permuted_gather(ids: Value, table_dims: tuple[int, ...]) -> Operation | None:
    """A row gather of a table of shape ``table_dims`` reading ``ids`` rearranged by reshapes
    and transposes, or some of them picked by a slice (``lookup-layout`` moves a time-major
    model's transpose of the looked-up rows onto their ids, flax ``nn.RNN`` over ``nn.Embed``,
    and a slice of the rows of one lookup pooled apart): the same ids in another order, or
    part of them. Enough to show a scatter-add at ``ids`` is that lookup's gradient, not to
    reuse the gather's order."""
    for u in row_gathers(ids, table_dims):
        v = u.operands[1]
        while True:
            if v is ids or same_elements(v, ids):
                return u
            if v.owner.opcode not in ("reshape", "transpose", "bitcast", "copy", "slice") \
                    or len(v.owner.operands) != 1:
                break
            v = v.owner.operands[0]
    return None


def depends_on(value: Value, op: Operation) -> bool:
    """Does ``value`` depend on ``op``'s result (a complete search of its producers)?"""
    stack, seen = [value.owner], set()
    while stack:
        o = stack.pop()
        if o is op:
            return True
        if id(o) in seen:
            continue
        seen.add(id(o))
        stack.extend(v.owner for v in o.operands)
    return False
