"""Table batching (FBGEMM TBE-style): merge independent ``ember.segment_reduce`` calls of one
computation that share their attributes into one ``ember.grouped_segment_reduce`` call with a
tuple result, so one kernel launch plans and parallelises the lookups of all tables at once.

A call joins a group only if none of its operands depends on a member's result (no cycles).
The grouped call's called computation calls each member's outlined computation and tuples the
results, so it stays a checkable reference.

When the members' results feed exactly one ``concatenate`` along dimension 1 (and nothing
else), as in DLRM's embedding stage, the concatenate joins the call:
``ember.grouped_segment_reduce_concat`` writes every table's pooled rows straight into the
concatenated ``[S, sum D]`` result (no per-table buffers, no copy); its reference computation
concatenates the members' calls.
"""

from __future__ import annotations

from typing import Any

from ember_xla.custom_calls import (
    GROUPED_SEGMENT_REDUCE,
    GROUPED_SEGMENT_REDUCE_CONCAT,
    SEGMENT_REDUCE,
    call_attributes,
)
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter

SINGLE = SEGMENT_REDUCE.name
GROUPED = GROUPED_SEGMENT_REDUCE.name
CONCAT = GROUPED_SEGMENT_REDUCE_CONCAT.name


def _ancestors(op: Operation) -> set[int]:
    """Every op ``op`` depends on (a complete search: no node limit)."""
    seen: set[int] = set()
    stack = [v.owner for v in op.operands]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        stack.extend(v.owner for v in o.operands)
    return seen


def group_key(kind: str, attrs: dict[str, Any]) -> tuple | None:
    """What calls must share to be batched into one call (their kernel attributes), or None
    for a call that is never batched (not a segment reduction, or weighted). One definition
    for the calls grouped here and the clusters the cost model plans as grouped calls."""
    if kind != SEGMENT_REDUCE.kind or attrs.get("weighted"):
        return None
    return tuple(sorted((k, attrs[k]) for k in SEGMENT_REDUCE.attributes))


def independent_groups(items: list[tuple[tuple, Operation]]) -> list[list[Operation]]:
    """``(key, op)`` pairs in dependency order -> groups (of two or more) of ops with one key
    none of which depends on another (first fit, in order)."""
    by_config: dict[tuple, list[list[Operation]]] = {}
    for key, op in items:
        groups = by_config.setdefault(key, [])
        anc = _ancestors(op)
        for grp in groups:
            if not any(id(m) in anc for m in grp):
                grp.append(op)
                break
        else:
            groups.append([op])
    return [grp for gs in by_config.values() for grp in gs if len(grp) > 1]


def _groups(g: Graph, allowed: set[int] | None) -> list[list[Operation]]:
    items = []
    for op in g.topological():
        if (op.opcode != "custom-call" or op.attributes.get("custom_call_target") != SINGLE
                or (allowed is not None and id(op) not in allowed)):
            continue
        key = group_key(SEGMENT_REDUCE.kind, call_attributes(op))
        if key is not None:
            items.append((key, op))
    return independent_groups(items)


def _concat_user(g: Graph, members: list[Operation]) -> Operation | None:
    """The one concatenate along dimension 1 that uses every member's result exactly once
    (in any order) and is their only user; None if there is none."""
    users = {id(u): u for m in members for u in m.result.users}
    if len(users) != 1 or any(g.root is m for m in members):
        return None
    (cat,) = users.values()
    if cat.opcode != "concatenate" or list(cat.attributes.get("dimensions", [])) != [1]:
        return None
    owners = [v.owner for v in cat.operands]
    if len(owners) != len(members) or {id(o) for o in owners} != {id(m) for m in members}:
        return None
    return cat


def _reference(module: Module, members: list[Operation], name: str,
               concat: Operation | None = None) -> Graph:
    comp = Graph(module.unique_graph_name(name))
    outs = []
    n = 0
    for m in members:
        params = []
        for v in m.operands:
            params.append(comp.append(Operation("parameter", [], [v.type],
                                                {"parameter_number": n}, name=f"p{n}")).result)
            n += 1
        outs.append(comp.append(Operation("call", params, [m.result.type], {}, [m.callees[0]],
                                          name="table")).result)
    if concat is not None:
        comp.root = comp.append(Operation("concatenate", outs, [concat.result.type],
                                          {"dimensions": [1]}, name="tables"))
    else:
        comp.root = comp.append(Operation("tuple", outs,
                                          [Shape.tuple_of([o.type for o in outs])],
                                          name="tables"))
    return comp


def group_tables(module: Module, rewriter: PatternRewriter | None = None,
                 concat: bool = True, allowed: set[int] | None = None) -> list[dict]:
    """Group in place (every edit through ``rewriter``); returns one entry per grouped call
    (its name and member calls). ``concat``: a concatenate of the members' results joins the
    call (``grouped_segment_reduce_concat``); without it the call returns their tuple.
    ``allowed``: ids of the only calls that may join a group (None: every call)."""
    rw = rewriter or PatternRewriter()
    made = []
    for g in list(module.graphs):
        for members in _groups(g, allowed):
            cat = _concat_user(g, members) if concat else None
            if cat is not None:
                made.append(_fuse_concat(module, g, members, cat, len(made), rw))
                continue
            operands = [v for m in members for v in m.operands]
            tshape = Shape.tuple_of([m.result.type for m in members])
            comp = _reference(module, members, f"{GROUPED}.{len(made)}")
            module.add(comp, before=g)
            attrs = dict(members[0].attributes)
            attrs["custom_call_target"] = GROUPED
            attrs.pop("metadata", None)
            # the last member follows every member's operands; users of earlier members that
            # sat before it are then put back in dependency order
            last = max(members, key=g.index_of)
            grouped = rw.insert_before(last, Operation(
                "custom-call", operands, [tshape], attrs, [comp],
                name="ember_grouped_segment_reduce"))
            for i, m in enumerate(members):
                gte = rw.insert_before(last, Operation(
                    "get-tuple-element", [grouped.result], [m.result.type],
                    {"tuple_index": i}, name=m.name))
                rw.replace_all_uses(m.result, gte.result)
            for m in members:
                rw.erase(m)
            rw.sort_topologically(g)
            made.append({"custom_call": grouped.name,
                         "members": [m.callees[0].name for m in members]})
    return made


def _fuse_concat(module: Module, g: Graph, members: list[Operation], cat: Operation,
                 n: int, rw: PatternRewriter) -> dict:
    """Replace ``concatenate(members)`` by one concatenated grouped call (at the concatenate,
    which follows every member and so every member's operands)."""
    members = [v.owner for v in cat.operands]  # the concatenate's order is the columns' order
    operands = [v for m in members for v in m.operands]
    comp = _reference(module, members, f"{CONCAT}.{n}", cat)
    module.add(comp, before=g)
    attrs = dict(members[0].attributes)
    attrs["custom_call_target"] = CONCAT
    attrs.pop("metadata", None)
    call = rw.insert_before(cat, Operation("custom-call", operands, [cat.result.type], attrs,
                                           [comp], name="ember_grouped_segment_reduce_concat"))
    rw.replace_all_uses(cat.result, call.result)
    rw.erase(cat)
    for m in members:
        rw.erase(m)
    rw.sort_topologically(g)
    return {"custom_call": call.name, "members": [m.callees[0].name for m in members],
            "concatenated": True}
