"""``rewrite_module``: find clusters, outline each into an ``ember.<kind>`` custom-call, verify,
and report. The input module is not modified; the result holds a rewritten copy."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.ir.graph import Module
from ember_xla.ir.hlo.verifier import verify_module
from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.rewrites.cluster import NearMiss
from ember_xla.rewrites.coverage import uncovered
from ember_xla.rewrites.group_tables import GROUPED, group_tables
from ember_xla.rewrites.matcher import Pattern, find_clusters
from ember_xla.rewrites.outline import outline
from ember_xla.rewrites.patterns import ALL_PATTERNS
from ember_xla.rewrites.report import cluster_entry, near_miss_entry
from ember_xla.rewrites.walk import NoMatch


@dataclasses.dataclass
class RewriteResult:
    module: Module
    clusters: list[dict[str, Any]]
    near_misses: list[dict[str, Any]]
    counters: dict[str, dict[str, int]]
    groups: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.clusters)

    def report(self) -> dict[str, Any]:
        return {"module": self.module.name, "clusters": self.clusters,
                "groups": self.groups, "near_misses": self.near_misses,
                "counters": self.counters}


def grouping_available() -> bool:
    from ember_xla.native import TARGETS

    return GROUPED in TARGETS


def rewrite_module(module: Module, patterns: list[Pattern] | None = None,
                   group: bool = False, canonical: bool = True,
                   assume_finite_tables: bool = False) -> RewriteResult:
    """Rewrite every cluster; with ``group``, independent same-attribute segment reductions
    of one computation share one table-batched call (see group_tables.py). Off by default:
    on the 26-table DLRM benchmark separate calls, which XLA:CPU runs concurrently, measured
    faster (docs/BENCHMARKS.md). ``canonical``: first run the canonicalization pipeline
    (rewrites/canonicalize); ``assume_finite_tables`` lets it turn one-hot lookups into
    gathers (exact only for tables without Inf/NaN)."""
    from ember_xla.runtime.execute import clone_module

    work = clone_module(module)
    notes = canonicalize(work, assume_finite_tables=assume_finite_tables) if canonical else []
    found = find_clusters(work, list(patterns or ALL_PATTERNS))
    entries, misses = [], [near_miss_entry(n) for n in found.near_misses]
    canon_misses = [NearMiss(n.pass_name, n.op, n.reason) for n in notes if n.op.parent]
    misses += [near_miss_entry(n) for n in canon_misses]
    misses += [near_miss_entry(n) for n in uncovered(work, found.clusters,
                                                     found.near_misses + canon_misses)]
    for i, c in enumerate(found.clusters):
        entry = cluster_entry(c, None)  # describe before the cluster's ops are erased
        try:
            cc = outline(work, c, i)
        except NoMatch as e:
            misses.append(near_miss_entry(NearMiss(c.pattern, c.root, str(e))))
            found.counters[c.pattern]["refused"] += 1
            continue
        entry["custom_call"] = cc.name
        entry["outlined_computation"] = cc.callees[0].name
        entries.append(entry)
    groups = group_tables(work) if group and entries and grouping_available() else []
    verify_module(work)
    counters = {k: dict(v) for k, v in found.counters.items()}
    return RewriteResult(work if entries else module, entries, misses, counters, groups)
