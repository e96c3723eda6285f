"""Inline a ``call`` or ``fusion``: clone the callee's body in place of the calling op."""

from __future__ import annotations

from ember_xla.ir.graph import Graph
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


def inline_call(op: Operation) -> Value:
    """Replace ``op`` (a call or fusion with one callee) by a copy of the callee's body;
    returns the value that replaced ``op``'s result."""
    g: Graph = op.parent
    callee = op.callees[0]
    mapping: dict[int, Value] = {}
    for p in callee.params():
        mapping[id(p.result)] = op.operands[p.attributes.get("parameter_number", 0)]
    for inner in callee.topological():
        if inner.opcode == "parameter":
            continue
        clone = inner.clone([mapping[id(v)] for v in inner.operands])
        g.insert_before(op, clone)
        mapping[id(inner.result)] = clone.result
    new = mapping[id(callee.root.result)]
    op.result.replace_all_uses_with(new)
    if g.root is op:
        g.root = new.owner
    g.erase(op)
    return new
