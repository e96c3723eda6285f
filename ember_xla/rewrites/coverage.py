"""No silent misses: every row gather that feeds a reduction must end up in a cluster or be
reported. ``lookup_reductions`` follows each gather of a [N,D] float table (or of a quantized
integer table whose rows are converted to floats) forward through
shape and elementwise ops (and into called computations) to the reductions it reaches (a
``dot`` counts when it contracts the rows over lookup axes and not over the row dim D: the
bag axis of ``patterns/dot_bag.py``, or any other layout of the same weighted sum);
``uncovered`` turns those the matcher neither clustered nor reported into near-misses, saying
whether the reduction itself is in a cluster (then only the gather stays in XLA). A reduction
within each row (``row_reduction.py``: a layer norm over a token embedding) is no bag, and a
gather that picks single elements (``lookup.picks_elements``: take_along_axis) reads no rows."""

from __future__ import annotations

from ember_xla.hlo.shape import FLOAT_TYPES
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster, NearMiss
from ember_xla.rewrites.lookup import picks_elements, quantized_reason, quantized_rows
from ember_xla.rewrites.patterns.dot_bag import bag_dot_operands
from ember_xla.rewrites.row_reduction import dot_sums_lookups, within_rows

REDUCTIONS = frozenset({"reduce", "scatter", "reduce-window", "select-and-scatter"})
THROUGH = frozenset({
    "reshape", "bitcast", "broadcast", "convert", "copy", "transpose", "slice", "concatenate",
    "multiply", "divide", "add", "subtract", "negate", "abs", "maximum", "minimum", "select",
    "clamp", "pad", "reverse", "tuple", "get-tuple-element", "bitcast-convert",
})
DEPTH = 8


def _is_row_gather(op: Operation) -> bool:
    t = op.operands[0].type if op.opcode == "gather" else None
    if t is None or t.rank != 2 or picks_elements(op):
        return False
    return t.element_type in FLOAT_TYPES or quantized_rows(op) is not None


def _reached(g: Operation, callers: dict[int, list[Operation]]) -> list[Operation]:
    """Reductions ``g``'s rows reach within DEPTH steps; a fusion/call whose body reduces
    them counts as reaching the fusion/call itself."""
    out: list[Operation] = []
    frontier, seen = [g], {id(g)}
    for _ in range(DEPTH):
        nxt: list[Operation] = []
        for op in frontier:
            if op.parent is not None and op is op.parent.root:  # leave a callee at its root
                for c in callers.get(id(op.parent), []):
                    if id(c) not in seen:
                        seen.add(id(c))
                        nxt.append(c)
            for u in op.users:
                if id(u) in seen:
                    continue
                seen.add(id(u))
                sides = bag_dot_operands(u) if u.opcode == "dot" else None
                if within_rows(u):  # a layer norm or a row's norm: no bag
                    continue
                if u.opcode in REDUCTIONS or (sides and u.operands[sides[0]].owner is op) or (
                        u.opcode == "dot" and dot_sums_lookups(u, op)):
                    out.append(u)
                elif u.opcode in ("call", "fusion") and any(
                        o.opcode in REDUCTIONS for c in u.callees for o in c.ops):
                    out.append(u)
                elif u.opcode in THROUGH or u.opcode == "call":
                    nxt.append(u)
        frontier = nxt
    return out


def lookup_reductions(module: Module) -> list[tuple[Operation, Operation]]:
    """(gather, reduction) pairs: row gathers whose values reach a reduction."""
    callers: dict[int, list[Operation]] = {}
    for g in module.graphs:
        for op in g.ops:
            if op.opcode in ("call", "fusion"):
                for c in op.callees:
                    callers.setdefault(id(c), []).append(op)
    pairs = []
    for g in module.graphs:
        for op in g.ops:
            if _is_row_gather(op):
                pairs.extend((op, r) for r in _reached(op, callers))
    return pairs


def uncovered(module: Module, clusters: list[Cluster],
              misses: list[NearMiss]) -> list[NearMiss]:
    """Near-misses for (gather, reduction) pairs no cluster owns and no near-miss names."""
    owned = {id(o) for c in clusters for o in c.owned}
    # reductions whose cluster gathers its rows itself: another gather reaching one of them
    # feeds an operand it takes computed (a GAT's attention weights come from the logits)
    looked_up = {id(o) for c in clusters if any(x.opcode == "gather" for x in c.owned)
                 for o in c.owned}
    reported = {id(n.root) for n in misses}
    out: list[NearMiss] = []
    for gather, red in lookup_reductions(module):
        if id(gather) in owned or id(red) in reported or id(red) in looked_up:
            continue
        if gather.parent is not None and any(id(o) in owned for o in gather.users):
            continue  # the rows are consumed inside a cluster (e.g. a call it steps into)
        reported.add(id(red))
        if id(red) in owned:  # the reduction is a cluster's; the gather before it is not
            reason = (f"gather {gather.name} feeds {red.opcode} {red.name}, whose cluster "
                      f"takes the gathered rows as a computed operand (the gather stays in XLA)")
        elif (integer := quantized_rows(gather)) is not None:
            reason = (f"gather {gather.name}, feeding {red.opcode} {red.name}, reads "
                      f"{quantized_reason(integer)}")
        elif red.opcode == "dot":
            reason = (f"gather {gather.name} feeds dot {red.name}, a weighted sum over the "
                      "lookups in a layout no cluster pattern takes (a dot bag is rows [B,L,D] "
                      "times weights [B,L], contracted over L with B batched)")
        else:
            reason = (f"gather {gather.name} feeds {red.opcode} {red.name}, which no cluster "
                      f"pattern matches")
        out.append(NearMiss("coverage", red, reason))
    return out
