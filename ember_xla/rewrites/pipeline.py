"""The cluster rewrite as a pass (``ember-rewrite-clusters{group=false}``): find clusters, outline
each into an ``ember.<kind>`` custom-call (every edit through one ``PatternRewriter``), verify,
and report. ``rewrite_module`` runs it on a copy (``Module.clone``): the input is never
modified."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.ir.graph import Module
from ember_xla.ir.hlo.verifier import verify_module
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.rewrites.cluster import NearMiss
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


@register_pass
@dataclasses.dataclass(frozen=True)
class RewriteClusters(ModulePass):
    """Rewrite every cluster in place. With ``group``, independent same-attribute segment
    reductions of one computation share one table-batched call (see group_tables.py). Off by
    default: on the 26-table DLRM benchmark separate calls, which XLA:CPU runs concurrently,
    measured faster (docs/BENCHMARKS.md)."""

    name = "ember-rewrite-clusters"
    group: bool = False

    def apply(self, module: Module) -> None:
        self.run(module)

    def run(self, module: Module, patterns: list[Pattern] | None = None) -> RewriteResult:
        rw = PatternRewriter()
        found = find_clusters(module, list(patterns or ALL_PATTERNS))
        entries, misses = [], [near_miss_entry(n) for n in found.near_misses]
        for i, c in enumerate(found.clusters):
            entry = cluster_entry(c, None)  # describe before the cluster's ops are erased
            try:
                cc = outline(module, c, i, rw)
            except NoMatch as e:
                misses.append(near_miss_entry(NearMiss(c.pattern, c.root, str(e))))
                found.counters[c.pattern]["refused"] += 1
                continue
            entry["custom_call"] = cc.name
            entry["outlined_computation"] = cc.callees[0].name
            entries.append(entry)
        groups = (group_tables(module, rw)
                  if self.group and entries and grouping_available() else [])
        verify_module(module)
        counters = {k: dict(v) for k, v in found.counters.items()}
        return RewriteResult(module, entries, misses, counters, groups)


def rewrite_module(module: Module, patterns: list[Pattern] | None = None,
                   group: bool = False) -> RewriteResult:
    """Rewrite every cluster of a copy of ``module`` (the input is left untouched); the
    result's module is the copy, or ``module`` itself when nothing was rewritten."""
    work = module.clone()
    result = RewriteClusters(group=group).run(work, patterns)
    if not result.clusters:
        result.module = module
    return result
