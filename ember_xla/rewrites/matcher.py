"""The pattern matcher: patterns indexed by root opcode, deterministic order, a reason for
every failed match of an op no pattern matched, and match counters (per pattern: tried,
matched, failed)."""

from __future__ import annotations

import collections
import dataclasses

from ember_xla.custom_calls import is_ember_call, is_emulate_call
from ember_xla.hlo.shape import FLOAT_TYPES, Shape
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster, NearMiss
from ember_xla.rewrites.lookup import picks_elements, quantized_rows
from ember_xla.rewrites.refs import first_producer
from ember_xla.rewrites.row_reduction import within_rows
from ember_xla.rewrites.walk import NoMatch


class Pattern:
    """A cluster pattern: ``match(root)`` returns a Cluster or raises NoMatch(reason)."""

    name = ""
    kind = ""
    roots: tuple[str, ...] = ()
    #: quiet: only failures raised with ``report`` set become near-misses (a pattern whose
    #: root opcode mostly belongs to other idioms, e.g. the backward's scatter)
    quiet = False

    def match(self, op: Operation) -> Cluster:
        raise NotImplementedError


@dataclasses.dataclass
class MatchResult:
    clusters: list[Cluster]
    near_misses: list[NearMiss]
    counters: dict[str, collections.Counter]


#: Ops whose result is no longer looked-up rows: a near-miss search does not look behind them.
_BEHIND = frozenset({"reduce", "scatter", "dot", "convolution", "reduce-window",
                     "select-and-scatter", "sort", "custom-call", "while", "conditional"})


def _float_gather(op: Operation) -> bool:
    """A gather of float rows, or of a quantized table's integer rows converted to floats."""
    return (op.opcode == "gather" and op.result.type.element_type in FLOAT_TYPES
            and not picks_elements(op)) or quantized_rows(op) is not None


def looks_like_lookup(op: Operation, depth: int = 8) -> bool:
    """Is there a gather of float rows within a few producer steps of a float result, not
    behind another reduction or a dot? (decides what counts as a near-miss: a reduction of a
    predicate or of integer ids -- the bounds check of a fill lookup, ids gathered from a
    sparse matrix's index array --, a loss's mean over an MLP's output, a norm of pooled
    rows or a reduction within each looked-up row is not one)."""
    if not any(r.type.is_array and r.type.element_type in FLOAT_TYPES for r in op.results):
        return False
    return _near_float_gather(op, depth) and not within_rows(op)  # (a layer norm: no bag)


def _near_float_gather(op: Operation, depth: int) -> bool:
    """A float gather within ``depth`` producer steps of ``op``, not behind ``_BEHIND``."""
    def found(d: Operation) -> bool | None:
        if _float_gather(d) or (d.opcode == "call" and any(
                _float_gather(x) for c in d.callees for x in c.ops)):
            return True
        return None

    return first_producer(op, depth, found, _BEHIND) is not None


def _dynamic(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(_dynamic(s) for s in shape.tuple_shapes)
    return any(shape.dynamic)


def dynamic_value(c: Cluster) -> str | None:
    """Why cluster ``c`` stays in XLA when one of its values has a bounded-dynamic dimension
    (TF's ``tf.unique`` before a lookup makes ``f32[<=1280,32]``), or None: the ember calls take
    static shapes (XLA:CPU refuses a custom-call with a dynamic dimension)."""
    values = [*c.inputs, *(r for o in c.owned for r in o.results)]
    for v in values:
        if _dynamic(v.type):
            return (f"{v.owner.name} is {v.type.to_text(False)}, a bounded-dynamic shape: "
                    "the ember calls take static shapes (XLA:CPU refuses a custom-call with a "
                    "dynamic dimension), so the cluster stays in XLA")
    return None


def call_bodies(module: Module) -> set[int]:
    """Ids of the graphs only the ember calls of an already rewritten module reach (each
    call's reference body and what it calls): the cluster there was rewritten already, so
    matching it again would emulate or rewrite one cluster twice."""
    def ember(op: Operation) -> bool:
        return is_ember_call(op) or is_emulate_call(op)

    bodies = [c for g in module.graphs for op in g.ops if ember(op) for c in op.callees]
    if not bodies:
        return set()
    entry = [module.entry] if module.entry is not None else []
    return Module.reachable(bodies) - Module.reachable(entry, lambda op: not ember(op))


def find_clusters(module: Module, patterns: list[Pattern]) -> MatchResult:
    by_root: dict[str, list[Pattern]] = collections.defaultdict(list)
    for p in patterns:
        for r in p.roots:
            by_root[r].append(p)
    counters: dict[str, collections.Counter] = {p.name: collections.Counter() for p in patterns}
    clusters: list[Cluster] = []
    misses: list[NearMiss] = []
    claimed: set[int] = set()
    done = call_bodies(module)
    for g in module.post_order():
        if id(g) in done:
            continue
        for op in g.topological():
            pending: list[NearMiss] = []  # reasons count only if no pattern matches the op
            matched = False
            for p in by_root.get(op.opcode, []):
                counters[p.name]["tried"] += 1
                try:
                    c = p.match(op)
                except NoMatch as e:
                    counters[p.name]["failed"] += 1
                    if getattr(e, "report", False) or (not p.quiet and looks_like_lookup(op)):
                        pending.append(NearMiss(p.name, op, str(e),
                                                getattr(e, "direction", None)))
                    continue
                dynamic = dynamic_value(c)
                if dynamic is not None:
                    counters[p.name]["failed"] += 1
                    pending.append(NearMiss(p.name, op, dynamic, getattr(c, "direction", None)))
                    continue
                overlap = [o.name for o in c.owned if id(o) in claimed]
                if overlap:  # earlier (topologically first) cluster wins
                    counters[p.name]["overlap"] += 1
                    pending.append(NearMiss(p.name, op, "overlaps an earlier cluster at "
                                                        + ", ".join(overlap)))
                    continue
                claimed.update(id(o) for o in c.owned)
                counters[p.name]["matched"] += 1
                clusters.append(c)
                matched = True
                break
            if not matched:
                misses.extend(pending)
    return MatchResult(clusters, misses, counters)
