"""Inline a ``call`` or ``fusion``: clone the callee's body in place of the calling op."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value


def inline_call(op: Operation, rewriter: PatternRewriter | None = None) -> Value:
    """Replace ``op`` (a call or fusion with one callee) by a copy of the callee's body, through
    ``rewriter``; returns the value that replaced ``op``'s result."""
    rw = rewriter or PatternRewriter()
    callee = op.callees[0]
    mapping: dict[Value, Value] = {}
    for p in callee.params():
        mapping[p.result] = op.operands[p.attributes.get("parameter_number", 0)]
    for inner in callee.topological():
        if inner.opcode == "parameter":
            continue
        clone = inner.clone([mapping[v] for v in inner.operands])
        rw.insert_before(op, clone)
        mapping[inner.result] = clone.result
    new = mapping[callee.root.result]
    rw.replace_op(op, new)
    return new
