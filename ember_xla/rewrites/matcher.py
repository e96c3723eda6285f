"""The pattern matcher: patterns indexed by root opcode, deterministic order, a reason for
every failed match of an op no pattern matched, and match counters (per pattern: tried,
matched, failed)."""

from __future__ import annotations

import collections
import dataclasses

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster, NearMiss
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


def looks_like_lookup(op: Operation, depth: int = 8) -> bool:
    """Is there a gather within a few producer steps? (decides what counts as a near-miss)."""
    frontier, seen = [op], set()
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for v in o.operands:
                d = v.owner
                if id(d) in seen:
                    continue
                seen.add(id(d))
                if d.opcode == "gather":
                    return True
                if d.opcode == "call" and any(x.opcode == "gather" for c in d.callees
                                              for x in c.ops):
                    return True
                nxt.append(d)
        frontier = nxt
    return False


def find_clusters(module: Module, patterns: list[Pattern]) -> MatchResult:
    by_root: dict[str, list[Pattern]] = collections.defaultdict(list)
    for p in patterns:
        for r in p.roots:
            by_root[r].append(p)
    counters: dict[str, collections.Counter] = {p.name: collections.Counter() for p in patterns}
    clusters: list[Cluster] = []
    misses: list[NearMiss] = []
    claimed: set[int] = set()
    for g in module.post_order():
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
