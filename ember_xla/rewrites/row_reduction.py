"""Reductions within each looked-up row: a reduce over the last dim only, of values whose last
dim is a row gather's feature dim all the way from the gather (a layer norm's mean and
variance over a token embedding, a row's norm, a softmax denominator over features). A bag
reduces across lookups, never within a row, so the near-miss search and the coverage audit
pass these by. Anything that could move the feature dim (a transpose or a reshape that changes
the last dim, a broadcast that maps another dim last) makes the answer "not provably within
rows". The other side: a dot that contracts looked-up rows over lookup axes, not over D
(``dot_sums_lookups``), sums across lookups."""

from __future__ import annotations

from ember_xla.hlo.opcodes import ELEMENTWISE
from ember_xla.hlo.shape import FLOAT_TYPES
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value

#: producer steps searched back from the reduce for the gathers of its rows
DEPTH = 16
#: ops whose values are no rows any more (the search stops there, nothing to check)
_OPAQUE = frozenset({"reduce", "dot", "convolution", "parameter", "constant", "iota",
                     "custom-call", "while", "conditional", "rng", "rng-bit-generator"})


def _feature_dim_last(gather: Operation, d: int) -> bool:
    """Does ``gather`` put the whole last dim (size ``d``) of its source last in its result?"""
    dn = gather.attributes.get("gather_dimension_numbers", {})
    src = gather.operands[0].type
    sizes = list(gather.attributes.get("gather_slice_sizes", []))
    return (src.dims[-1] == d and bool(sizes) and sizes[-1] == d
            and gather.result.type.dims[-1] == d
            and (dn.get("offset_dims") or [None])[-1] == gather.result.type.rank - 1)


def _constant_along_last(op: Operation) -> bool:
    """A broadcast none of whose operand's dims becomes the result's last dim."""
    dims = list(op.attributes.get("dimensions", []))
    return op.opcode == "broadcast" and op.result.type.rank - 1 not in dims


def _keeps_last(op: Operation, d: int) -> bool:
    """A broadcast or slice whose operand's last dim (size ``d``) is its result's last dim."""
    src, out = op.operands[0].type, op.result.type
    if op.opcode == "broadcast":
        dims = list(op.attributes.get("dimensions", []))
        return dims[-1] == out.rank - 1 and src.dims[-1] == d
    # (a slice keeping the size keeps the whole last dim: start 0, stride 1)
    return src.rank == out.rank and src.dims[-1] == d == out.dims[-1]


def within_rows(op: Operation) -> bool:
    """Is ``op`` a reduce over the last dim only of values that reach float row gathers only
    through ops keeping the gathered feature dim last (and reach at least one)?"""
    if op.opcode != "reduce" or len(op.operands) != 2:
        return False
    src = op.operands[0].type
    if src.rank < 2 or list(op.attributes.get("dimensions", [])) != [src.rank - 1]:
        return False
    d = src.dims[-1]
    frontier, seen, found = [op.operands[0].owner], set(), False
    for _ in range(DEPTH):
        nxt: list[Operation] = []
        for o in frontier:
            if id(o) in seen:
                continue
            seen.add(id(o))
            if o.opcode == "gather":
                if o.result.type.element_type not in FLOAT_TYPES:
                    continue
                if not _feature_dim_last(o, d):
                    return False
                found = True
            elif o.opcode in _OPAQUE or not o.result.type.is_array:
                continue
            elif o.result.type.rank == 0 or _constant_along_last(o):
                continue  # the same value along a row: nothing summed across lookups
            elif o.opcode in ("broadcast", "slice"):
                if not _keeps_last(o, d):
                    return False
                nxt.append(o.operands[0].owner)
            elif o.opcode in ("reshape", "bitcast", "transpose"):
                # row-major: a reshape keeping the last dim's size keeps each row's elements
                # in one row; a transpose keeping the last dim last, likewise
                perm = o.attributes.get("dimensions") if o.opcode == "transpose" else None
                t = o.operands[0].type
                relaid = o.opcode == "bitcast" and not (t.has_default_layout()
                                                        and o.result.type.has_default_layout())
                if (not t.is_array or t.rank == 0 or t.dims[-1] != d or relaid
                        or (perm is not None and perm[-1] != t.rank - 1)):
                    return False
                nxt.append(o.operands[0].owner)
            elif o.opcode in ELEMENTWISE:
                if o.result.type.dims[-1] != d:
                    return False
                nxt.extend(v.owner for v in o.operands)
            else:
                return False
        frontier = nxt
    return found and not frontier


#: ops whose result has their first operand's dims in the same places
_SAME_AXES = frozenset({"convert", "copy", "reverse", "slice", "pad", "bitcast-convert"})


def feature_axis(v: Value, depth: int = DEPTH,
                 seen: dict[tuple[int, int], int | None] | None = None) -> int | None:
    """The axis of ``v`` that holds a float row gather's feature dim, followed back through
    transposes, broadcasts, reshapes keeping the last dim and elementwise ops; None when no
    row gather is reached that way. ``seen`` holds the answers of this search (a residual
    stream's adds reach the same values along many paths)."""
    seen = {} if seen is None else seen
    key = (id(v), depth)
    if key not in seen:
        seen[key] = _feature_axis(v, depth, seen)
    return seen[key]


def _feature_axis(v: Value, depth: int, seen: dict[tuple[int, int], int | None]) -> int | None:
    op = v.owner
    if op is None or not v.type.is_array or v.type.rank == 0:
        return None
    if op.opcode == "gather":
        return (v.type.rank - 1 if v.type.element_type in FLOAT_TYPES
                and _feature_dim_last(op, v.type.dims[-1]) else None)
    if depth == 0 or not op.operands:
        return None
    src = op.operands[0]
    if op.opcode == "transpose":
        a = feature_axis(src, depth - 1, seen)
        return None if a is None else list(op.attributes.get("dimensions", [])).index(a)
    if op.opcode == "broadcast":
        a = feature_axis(src, depth - 1, seen)
        return None if a is None else list(op.attributes.get("dimensions", []))[a]
    if op.opcode in ("reshape", "bitcast"):
        a = feature_axis(src, depth - 1, seen)
        keeps = a == src.type.rank - 1 and src.type.dims[-1] == v.type.dims[-1]
        return v.type.rank - 1 if keeps else None
    if op.opcode in _SAME_AXES or op.opcode in ELEMENTWISE:
        for o in op.operands:
            if o.type.is_array and o.type.rank == v.type.rank:
                a = feature_axis(o, depth - 1, seen)
                if a is not None:
                    return a
    return None


def dot_sums_lookups(dot: Operation, rows: Operation) -> bool:
    """Does ``dot`` contract the values ``rows`` produces over some of their lookup axes and
    not over the row dim D (which a dense layer, a two-tower score ``u @ rows.T`` or an
    attention contracts)? A weighted sum across lookups in any layout (an einsum of
    time-major rows [P,B,D] over P). D is where ``feature_axis`` finds it, else the last
    axis."""
    dn = dot.attributes.get("dot_dimension_numbers", {})
    for i, side in enumerate(("lhs", "rhs")):
        if i < len(dot.operands) and dot.operands[i].owner is rows:
            rank = dot.operands[i].type.rank
            cd = [int(x) for x in dn.get(f"{side}_contracting_dimensions", [])]
            d_axis = feature_axis(dot.operands[i])
            if rank >= 2 and cd and (rank - 1 if d_axis is None else d_axis) not in cd:
                return True
    return False
