"""When two values of one computation are provably equal, from the HLO alone.

``same_value``: the same value, or computed by identical pure instructions (same opcode,
attributes, type and callees) from the same values (what multi_output.py merges, and what XLA's
CSE merges). Callees are compared as XLA's CSE compares them, by structure: JAX gives each
``reduce`` a combining computation of its own, so ``t[i].sum(1)`` traced twice calls
``region_0`` and ``region_1``, equal op for op.

``same_elements``: the two hold the same elements in the same row-major order, whatever their
shapes. Besides ``same_value`` it looks through reshapes, copies, bitcasts between row-major
layouts, through integer converts there and back (``s32 -> u32 -> s32``, ``s32 -> s64 -> s32``:
the identity in two's complement), and compares elementwise instructions and scalar broadcasts
by element type and count, since an elementwise op commutes with a reshape. JAX writes a
lookup's index arithmetic again for a hand-built gradient
(``jnp.zeros_like(t).at[ids].add(rows)`` wraps the negative ids and reshapes them to ``[...,
1]`` once more); those ids are the lookup's. Two parameters are never equal, whatever values
the caller passes."""

from __future__ import annotations

from ember_xla.hlo.opcodes import ELEMENTWISE
from ember_xla.ir.graph import Graph
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PURE

_DEPTH = 64
_IGNORED = ("metadata", "statistics_viz")
_INT_BITS = {f"{s}{b}": b for s in "su" for b in (8, 16, 32, 64)}


def _attributes(op: Operation) -> dict:
    return {k: v for k, v in op.attributes.items() if k not in _IGNORED}


def same_computation(g: Graph, h: Graph) -> bool:
    """``g`` and ``h`` compute the same function, op for op: the same opcodes, attributes,
    result types and callees (recursively), operands at the same positions, the same root."""
    if g is h:
        return True
    if len(g.ops) != len(h.ops) or g.root is None or h.root is None:
        return False
    pos_g = {id(op): i for i, op in enumerate(g.ops)}
    pos_h = {id(op): i for i, op in enumerate(h.ops)}
    if pos_g.get(id(g.root)) != pos_h.get(id(h.root)):
        return False
    for a, b in zip(g.ops, h.ops, strict=True):
        if (a.opcode != b.opcode or _attributes(a) != _attributes(b)
                or [r.type for r in a.results] != [r.type for r in b.results]
                or len(a.operands) != len(b.operands) or len(a.callees) != len(b.callees)):
            return False
        for x, y in zip(a.operands, b.operands, strict=True):
            if (x.index != y.index or id(x.owner) not in pos_g
                    or pos_g[id(x.owner)] != pos_h.get(id(y.owner))):
                return False
        if not all(same_computation(c, d) for c, d in zip(a.callees, b.callees, strict=True)):
            return False
    return True


def _comparable(a: Value, b: Value) -> bool:
    """Same kind of pure instruction (opcode, result index, attributes, callees, arity)."""
    oa, ob = a.owner, b.owner
    return (
        isinstance(oa, Operation)
        and isinstance(ob, Operation)
        and a.index == b.index
        and oa.opcode == ob.opcode
        and oa.opcode != "parameter"
        and oa.opcode in PURE
        and len(oa.operands) == len(ob.operands)
        and len(oa.callees) == len(ob.callees)
        and all(same_computation(g, h) for g, h in zip(oa.callees, ob.callees, strict=True))
        and _attributes(oa) == _attributes(ob)
    )


def same_value(
    a: Value, b: Value, depth: int = _DEPTH, memo: dict[tuple[int, int], bool] | None = None
) -> bool:
    """``a`` and ``b`` are the same value, or computed by identical pure instructions (same
    opcode, attributes, type and callees) from the same values, up to ``depth`` steps."""
    if a is b:
        return True
    if depth == 0 or a.type != b.type or not _comparable(a, b):
        return False
    memo = {} if memo is None else memo
    key = (id(a), id(b))
    if key not in memo:
        memo[key] = all(
            same_value(x, y, depth - 1, memo)
            for x, y in zip(a.owner.operands, b.owner.operands, strict=True)
        )
    return memo[key]


def _round_trip(v: Value) -> Value | None:
    """x if ``v`` is ``convert(convert(x))`` back to x's integer type through an integer type
    at least as wide (two's-complement wrap and extension undo each other)."""
    outer = v.owner
    if outer.opcode != "convert" or outer.operands[0].owner.opcode != "convert":
        return None
    mid, x = outer.operands[0], outer.operands[0].owner.operands[0]
    t, m = x.type.element_type, mid.type.element_type
    if t != v.type.element_type or t not in _INT_BITS or m not in _INT_BITS:
        return None
    return x if _INT_BITS[m] >= _INT_BITS[t] else None


def _flat(v: Value) -> Value:
    """Through the ops that keep the elements and their row-major order."""
    while True:
        op = v.owner
        src = op.operands[0].type if op.operands else None
        if op.opcode in ("reshape", "copy") or (
            op.opcode == "convert" and src.element_type == v.type.element_type
        ) or (  # a bitcast reinterprets the physical order: row-major on both sides only
            op.opcode == "bitcast"
            and src.element_type == v.type.element_type
            and src.has_default_layout()
            and v.type.has_default_layout()
        ):
            v = op.operands[0]
        elif (x := _round_trip(v)) is not None:
            v = x
        else:
            return v


def same_elements(
    a: Value, b: Value, depth: int = _DEPTH, memo: dict[tuple[int, int], bool] | None = None
) -> bool:
    """``a`` and ``b`` hold the same elements in the same row-major order (shapes may differ):
    see the module docstring."""
    a, b = _flat(a), _flat(b)
    if a is b:
        return True
    ta, tb = a.type, b.type
    if (
        depth == 0
        or ta.element_type != tb.element_type
        or ta.size != tb.size
        or not _comparable(a, b)
    ):
        return False
    memo = {} if memo is None else memo
    key = (id(a), id(b))
    if key in memo:
        return memo[key]
    oa, ob = a.owner, b.owner
    if oa.opcode == "broadcast" and oa.operands[0].type.rank == 0:
        ok = ob.operands[0].type.rank == 0 and same_value(oa.operands[0], ob.operands[0])
    elif oa.opcode in ELEMENTWISE:
        ok = all(
            same_elements(x, y, depth - 1, memo)
            for x, y in zip(oa.operands, ob.operands, strict=True)
        )
    else:
        ok = same_value(a, b, depth, memo)
    memo[key] = ok
    return ok
