"""Outline a matched cluster into its own computation and replace it by a custom-call.

The outlined computation takes exactly the custom-call's operands (in the kernel's shapes) and
computes what the cluster computed, so it stays in the module as the reference any tool can
check the call against or fall back to. Only the ops the cluster owns are erased; shared
constants are cloned, and nothing outside the cluster changes.
"""

from __future__ import annotations

import math

from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.custom_call import custom_call_attributes
from ember_xla.rewrites.walk import NoMatch


def kernel_shapes(c: Cluster) -> list[Shape]:
    """The operand shapes the kernel takes: [N,D] table, then lookups flattened to [L]
    (segment_reduce) or [B,P] (padded_bag)."""
    if c.kernel_shapes is not None:
        return list(c.kernel_shapes)
    out = [c.inputs[0].type]
    if c.kind == "padded_bag":
        b, p = c.root.operands[0].type.dims[:2]
        lookup_dims = (b, p)
    else:
        lookup_dims = (c.root.operands[2].type.dims[0],)
    for v in c.inputs[1:]:
        s = v.type
        if s.size != math.prod(lookup_dims):
            raise NoMatch(f"input {v.owner.name} {s} does not hold one value per lookup")
        out.append(Shape.array(s.element_type, lookup_dims))
    return out


def _depends_on_owned(values: list[Value], owned: set[int]) -> str | None:
    """The name of an owned op some value depends on (a complete search: no node limit)."""
    stack = [v.owner for v in values]
    seen: set[int] = set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if id(op) in owned:
            return op.name
        stack.extend(v.owner for v in op.operands)
    return None


def outline(module: Module, c: Cluster, index: int,
            rewriter: PatternRewriter | None = None) -> Operation:
    """Outline cluster ``c`` (every edit through ``rewriter``); returns the custom-call."""
    rw = rewriter or PatternRewriter()
    g: Graph = c.root.parent
    owned = {id(op) for op in c.owned}
    cyc = _depends_on_owned(c.inputs, owned)
    if cyc is not None:
        raise NoMatch(f"outlining would form a cycle: an input depends on {cyc}")
    shapes = kernel_shapes(c)
    comp = Graph(module.unique_graph_name(f"ember.{c.kind}.{index}"))
    mapping: dict[int, Value] = {}
    for i, (v, role, s) in enumerate(zip(c.inputs, c.input_roles, shapes, strict=True)):
        p = comp.append(Operation("parameter", [], [s], {"parameter_number": i}, name=role))
        val = p.result
        if s.dims != v.type.dims:
            val = comp.append(Operation("reshape", [val], [v.type], name=role + ".reshape")).result
        mapping[id(v)] = val

    cone: list[Operation] = []
    stack: list[tuple[Operation, bool]] = [(c.root, False)]
    placed: set[int] = set()
    while stack:
        op, ready = stack.pop()
        if id(op) in placed:
            continue
        if not ready:
            stack.append((op, True))
            for v in op.operands:
                if id(v) not in mapping and id(v.owner) not in placed:
                    if v.owner.opcode == "parameter":
                        raise NoMatch(f"the cluster reads parameter {v.owner.name}, which is "
                                      "not one of its inputs")
                    stack.append((v.owner, False))
            continue
        placed.add(id(op))
        cone.append(op)
        new = op.clone([mapping[id(v)] for v in op.operands])
        comp.append(new)
        mapping[id(op.result)] = new.result
    comp.root = mapping[id(c.root.result)].owner
    module.add(comp, before=g)

    operands = []
    for v, s in zip(c.inputs, shapes, strict=True):
        if s.dims != v.type.dims:
            v = rw.insert_before(c.root, Operation("reshape", [v], [s],
                                                   name=v.owner.name + ".r")).result
        operands.append(v)
    cc = Operation("custom-call", operands, [c.root.result.type],
                   custom_call_attributes(c.kind, c.attrs), [comp], name=f"ember_{c.kind}")
    md = c.root.attributes.get("metadata")
    if md:
        cc.attributes["metadata"] = dict(md)
    rw.insert_before(c.root, cc)
    rw.replace_all_uses(c.root.result, cc.result)
    # erase the owned ops, then cone members (shared constants) that only they used
    for op in reversed(cone):
        if op.parent is g and not op.users and op is not g.root and (
                id(op) in owned or op.opcode in ("constant", "broadcast")):
            rw.erase(op)
    return cc
