"""The forward lookup a scatter's ids come from: a row gather of a table of the scatter's shape
reading the same ids (or the ids a clip-mode clamp clamps, or ids ``same_value.py`` proves
equal, or -- over stacked tables -- the clamped ids of the ids the scatter keeps in bounds),
and whether a value depends on an op (a "lookup" computed from the scatter itself is a forward
segment sum, not a gradient)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.refs import Ref, scalar_constant
from ember_xla.rewrites.same_value import same_elements


def _unclamped(ids: Value, rows: int) -> Value | None:
    """x if ``ids`` is ``clamp(0, x, rows - 1)`` (``mode="clip"``: JAX clamps the scatter's
    indices explicitly, while the forward gather reads x and XLA's gather clamps it itself)."""
    op = ids.owner
    if op.opcode != "clamp" or len(op.operands) != 3:
        return None
    lo, hi = (scalar_constant(Ref(op.operands[i])) for i in (0, 2))
    return op.operands[1] if lo == 0 and hi == rows - 1 else None


def _in_bounds_ids(ids: Value) -> tuple[Value, Value, float] | None:
    """(x, base, n) if ``ids`` is ``select(x >= 0 and x <= n-1, x + base, -1)``: the flat ids
    ``stacked-tables`` gives the scatter of a vmapped lookup over stacked tables (an id out of
    its own table dropped)."""
    op = ids.owner
    if op.opcode != "select" or scalar_constant(Ref(op.operands[2])) != -1:
        return None
    ok, add = op.operands[0].owner, op.operands[1].owner
    if ok.opcode != "and" or add.opcode != "add":
        return None
    x, base = add.operands
    bounds = {}
    for v in ok.operands:
        c = v.owner
        if c.opcode != "compare" or c.operands[0] is not x:
            return None
        bounds[c.attributes.get("comparison_direction")] = scalar_constant(Ref(c.operands[1]))
    if bounds.get("GE") != 0 or bounds.get("LE") is None:
        return None
    return x, base, bounds["LE"] + 1


def _stacked_gather(ids: Value, table_dims: tuple[int, ...]) -> Operation | None:
    """The row gather of the flat stacked table reading ``clamp(0, x, n-1) + base`` (the
    lookup whose ids the scatter reads as ``select(in_bounds(x), x + base, -1)``)."""
    found = _in_bounds_ids(ids)
    if found is None:
        return None
    x, base, n = found
    for u in row_gathers(ids, table_dims):
        v = u.operands[1]
        while v.owner.opcode in ("reshape", "bitcast") and v.type.size == ids.type.size:
            v = v.owner.operands[0]
        add = v.owner
        if add.opcode != "add" or tuple(add.result.type.dims) != tuple(ids.type.dims):
            continue
        cx = _unclamped(add.operands[0], int(n))
        if cx is not None and same_elements(cx, x) and same_elements(add.operands[1], base):
            return u
    return None


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
    """A row gather reading ``ids`` (or the ids a clip-mode clamp clamps) as its indices from a
    table of shape ``table_dims``: the same value, or provably the same ids in the same order
    (``same_elements``: the index arithmetic written again, reshaped, converted there and
    back), as a hand-built gradient ``jnp.zeros_like(t).at[ids].add(rows)`` reads them."""
    raw = _unclamped(ids, table_dims[0])
    if raw is not None:
        found = forward_gather(raw, table_dims)
        if found is not None:
            return found
    for u in ids.owner.users:
        if _table_gather(u, table_dims) and u.operands[1] is ids:
            return u
    for u in row_gathers(ids, table_dims):
        if same_elements(u.operands[1], ids):
            return u
    return _stacked_gather(ids, table_dims)


def permuted_gather(ids: Value, table_dims: tuple[int, ...]) -> Operation | None:
    """A row gather of a table of shape ``table_dims`` reading ``ids`` rearranged by reshapes
    and transposes (``lookup-layout`` moves a time-major model's transpose of the looked-up
    rows onto their ids: flax ``nn.RNN`` over ``nn.Embed``): the same ids in another order.
    Enough to show a scatter-add at ``ids`` is that lookup's gradient, not to reuse the
    gather's order."""
    for u in row_gathers(ids, table_dims):
        v = u.operands[1]
        while True:
            if v is ids or same_elements(v, ids):
                return u
            if v.owner.opcode not in ("reshape", "transpose", "bitcast", "copy") \
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
