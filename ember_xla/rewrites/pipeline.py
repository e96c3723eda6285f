"""The cluster rewrite as a pass (``ember-rewrite-clusters{group=true}``): find clusters, outline
each into an ``ember.<kind>`` custom-call (every edit through one ``PatternRewriter``), verify,
and report. ``rewrite_module`` runs it on a copy (``Module.clone``): the input is never
modified."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.custom_calls import ORDERED_SCATTER, TARGETS
from ember_xla.hlo.verifier import verify_module
from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.rewrites import call_plan, precision, profitability, ynn_fusions
from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.rewrites.cluster import NearMiss
from ember_xla.rewrites.coverage import uncovered
from ember_xla.rewrites.fuse_optimizer import fuse_optimizers
from ember_xla.rewrites.group_tables import GROUPED, group_tables
from ember_xla.rewrites.keep_in_xla import keep_in_xla
from ember_xla.rewrites.matcher import Pattern, find_clusters
from ember_xla.rewrites.multi_output import merge_multi_output
from ember_xla.rewrites.outline import outline
from ember_xla.rewrites.patterns import ALL_PATTERNS, DAE_PATTERNS
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
    return GROUPED in TARGETS


@register_pass
@dataclasses.dataclass(frozen=True)
class RewriteClusters(ModulePass):
    """Rewrite every cluster in place. With ``group`` (the default), independent same-attribute
    segment reductions of one computation share one table-batched call (see group_tables.py):
    it pays one call's fixed cost instead of k and writes a concatenated result in place
    (``group_concat``; off: the call returns the tables' tuple, the DAE machines' form). With
    the cost model on, call_plan.py decides per call whether such clusters become one grouped
    call, separate calls or stay in XLA, by predicted time; the report gives each cluster's
    ``decision`` and each group's predicted times. ``canonical``: first run the canonicalization
    pipeline (rewrites/canonicalize); ``assume_finite_tables`` lets it turn one-hot lookups
    into gathers (exact only for tables without Inf/NaN). ``cost_model``: on | off | env
    (EMBER_XLA_COST_MODEL, default on): clusters the measured cost model predicts faster in XLA
    stay there (profitability.py), reported as near-misses with both predicted times; a
    lookup's gradient is judged with its update: fused only where the fused call is predicted
    faster than XLA's scatter and dense update (the entry's ``predicted_us``; otherwise its
    ``optimizer_reason`` and ``fused_predicted_us`` say so); unfused and predicted slower than
    XLA's scatter, its call goes back to XLA (keep_in_xla.py).
    ``multi_output``: segment reductions of one lookup (sum and max of the same gathered rows)
    share one ``ember.multi_segment_reduce`` call (multi_output.py), listed in ``groups``.
    ``fuse_optimizer``: a lookup's gradient whose only use is an exact SGD/Adagrad update
    becomes one in-place sparse update call (fuse_optimizer.py); each backward entry says
    which ``optimizer`` was fused, or null and why not. ``excess_precision``: the
    ``xla_allow_excess_precision`` the module will be compiled with (``env``: XLA_FLAGS, else
    XLA's default, true); clusters whose kernel cannot compute what XLA:CPU computes with it
    stay in XLA (precision.py)."""

    name = "ember-rewrite-clusters"
    group: bool = True
    group_concat: bool = True
    canonical: bool = True
    assume_finite_tables: bool = False
    xla_order: bool = True
    cost_model: str = "env"
    multi_output: bool = True
    fuse_optimizer: bool = True
    excess_precision: str = "env"

    def apply(self, module: Module) -> None:
        self.run(module)

    def run(self, module: Module, patterns: list[Pattern] | None = None) -> RewriteResult:
        if not self.xla_order:
            return self._run(module, patterns)
        # the CPU rewrite reads XLA:CPU's YNNPACK fusions of the original module and, where a
        # bag's fusion computes inexact ops, of trial rewrites (ynn_fusions)
        options = {"xla_allow_excess_precision": self._excess()}
        original = ynn_fusions.read(module, options)
        kept: dict[str, str] = {}
        if original is not None and original.needs_trial():
            for _ in range(len(original.bags) + len(original.roundings)):
                trial = module.clone()
                with ynn_fusions.deciding(original, kept):
                    self._run(trial, patterns)
                present = {op.name for g in trial.graphs for op in g.ops}
                more = {b: why for b, why in ynn_fusions.changed(
                    original, ynn_fusions.read(trial, options, rewritten=True), present).items()
                    if b not in kept}
                if not more:
                    break
                kept.update(more)
        with ynn_fusions.deciding(original, kept):
            return self._run(module, patterns)

    def _excess(self) -> bool:
        return (precision.excess_precision_from_env() if self.excess_precision == "env"
                else self.excess_precision == "true")

    def _run(self, module: Module, patterns: list[Pattern] | None) -> RewriteResult:
        rw = PatternRewriter()
        excess = self._excess()
        notes = (canonicalize(module, assume_finite_tables=self.assume_finite_tables,
                              xla_order=self.xla_order)
                 if self.canonical else [])
        found = find_clusters(module, list(patterns or (ALL_PATTERNS if self.xla_order
                                                        else DAE_PATTERNS)))
        entries, misses = [], [near_miss_entry(n) for n in found.near_misses]
        roots = {id(c.root) for c in found.clusters}  # a pattern took what a pass refused
        canon = [NearMiss(n.pass_name, n.op, n.reason) for n in notes
                 if n.op.parent and id(n.op) not in roots]
        misses += [near_miss_entry(n) for n in canon]
        misses += [near_miss_entry(n)
                   for n in uncovered(module, found.clusters, found.near_misses + canon)]
        found.clusters, refused = precision.split(found.clusters, excess)
        for c, why in refused:
            misses.append({**near_miss_entry(NearMiss(c.pattern, c.root, why)),
                           "kept_in_xla": True})
            found.counters[c.pattern]["refused"] += 1
        plan = None
        if (profitability.enabled() if self.cost_model == "env" else self.cost_model == "on"):
            plan = call_plan.plan_calls(found.clusters, self.group and grouping_available())
            found.clusters = plan.rewrite
            for n, p in plan.kept:
                misses.append({**near_miss_entry(n), "kept_in_xla": True, "decision": "xla",
                               "predicted_us": _us(p)})
                found.counters[n.pattern]["kept_in_xla"] += 1
        allowed: set[int] | None = None if plan is None else set()
        by_name: dict[str, Any] = {}
        slow_grads: dict[str, tuple[str, dict[str, Any], dict[str, float]]] = {}
        for i, c in enumerate(found.clusters):
            entry = cluster_entry(c, None)  # describe before the cluster's ops are erased
            grad_p = (profitability.gradient_prediction(c)
                      if plan is not None and c.kind == "scatter_grad" else None)
            grad_miss = profitability.gradient_kept(c, grad_p)
            miss_entry = None if grad_miss is None else near_miss_entry(grad_miss)  # in place
            if plan is not None and id(c) in plan.predictions:
                entry["predicted_us"] = _us(plan.predictions[id(c)])
                entry["decision"] = plan.decisions[id(c)]
            try:
                cc = outline(module, c, i, rw)
            except NoMatch as e:
                misses.append(near_miss_entry(NearMiss(c.pattern, c.root, str(e))))
                found.counters[c.pattern]["refused"] += 1
                continue
            if allowed is not None and id(c) in plan.grouped:
                allowed.add(id(cc))
            entry["custom_call"] = cc.name
            entry["outlined_computation"] = cc.callees[0].name
            if grad_p is not None:
                entry["predicted_us"] = _us(grad_p)
                if grad_miss is not None and miss_entry is not None:
                    slow_grads[cc.name] = (grad_miss.pattern, miss_entry, grad_p)
            by_name[cc.callees[0].name] = c
            entries.append(entry)
        grads = [e for e in entries if e["pass"] == "backward"]
        # an ordered scatter (a sparse apply, XLA's fold of A + scatter-add) is aliased with
        # its operand there too, forward ones included
        scatters = grads or any(e["kind"] == ORDERED_SCATTER.kind for e in entries)
        fused_p: dict[str, dict[str, float]] = {}

        def judge(gcall: Any, optimizer: str, donated: bool) -> dict[str, Any] | None:
            c = by_name.get(gcall.callees[0].name)  # by its outlined computation
            p = None if c is None else profitability.fused_prediction(c, optimizer, donated)
            if p is None:
                return None
            why = profitability.fused_kept(c, optimizer, donated, p)
            if why is None:
                fused_p[gcall.name] = p
                return None
            return {"optimizer": None, "optimizer_reason": why, "fused_predicted_us": _us(p)}

        fused = (fuse_optimizers(module, rw, judge=None if plan is None else judge)
                 if self.fuse_optimizer and scatters else {})
        unfused = ("the gradient is computed inside a called computation (a loop body: a scan "
                   "over microbatches), which optimizer fusion does not enter; its update stays "
                   "in XLA" if self.fuse_optimizer else "optimizer fusion is off")
        for e in grads:
            gradient_call = e["custom_call"]
            e.update(fused.get(gradient_call, {
                "optimizer": None, "optimizer_reason": unfused}))
            if e.get("optimizer") is not None and plan is not None:
                # the fused call replaces XLA's scatter and its dense update of the table
                e["decision"] = "fused"
                if gradient_call in fused_p:
                    e["predicted_us"] = _us(fused_p[gradient_call])
        for e in list(entries):  # unfused, predicted slower than XLA's scatter: back to XLA
            if e.get("optimizer") is None and e["custom_call"] in slow_grads:
                pattern, miss, p = slow_grads[e["custom_call"]]
                keep_in_xla(module, e["custom_call"], rw)
                entries.remove(e)
                unfused_why = {k: e[k] for k in ("optimizer_reason", "fused_predicted_us")
                               if k in e}
                misses.append({**miss, "kept_in_xla": True, "decision": "xla",
                               "predicted_us": _us(p), **unfused_why})
                found.counters[pattern]["kept_in_xla"] += 1
        multi = (merge_multi_output(module, rw)
                 if self.multi_output and len(entries) > 1 else [])
        groups = (group_tables(module, rw, self.group_concat, allowed)
                  if self.group and len(entries) > 1 and grouping_available() else [])
        by_comp = {e["outlined_computation"]: e for e in entries}
        in_groups = {n for grp in groups for n in grp["members"]}
        for e in entries:  # planned into a group that another merge left without partners
            if e.get("decision") == "grouped" and e["outlined_computation"] not in in_groups:
                e["decision"] = "separate"
        for grp in groups:
            times = (call_plan.group_times([by_name[n] for n in grp["members"]])
                     if plan is not None else None)
            if times is not None:
                grp["decision"] = "grouped"
                grp["predicted_us"] = _us(times)
        for grp in multi:
            for n in grp["members"]:
                if n in by_comp:
                    by_comp[n]["merged_into"] = grp["custom_call"]
        groups += multi
        verify_module(module)
        counters = {k: dict(v) for k, v in found.counters.items()}
        return RewriteResult(module, entries, misses, counters, groups)


def _us(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v * 1e6, 1) for k, v in seconds.items()}


def rewrite_module(module: Module, patterns: list[Pattern] | None = None,
                   group: bool = True, cost_model: bool | None = None,
                   canonical: bool = True, assume_finite_tables: bool = False,
                   multi_output: bool = True, fuse_optimizer: bool = True,
                   group_concat: bool = True, excess_precision: bool | None = None,
                   xla_order: bool = True) -> RewriteResult:
    """Rewrite every cluster of a copy of ``module`` (the input is left untouched); the
    result's module is the copy, or ``module`` itself when nothing was rewritten. With
    ``cost_model`` (default: on unless EMBER_XLA_COST_MODEL=off) clusters predicted faster
    in XLA stay there. ``excess_precision``: the ``xla_allow_excess_precision`` the module
    will be compiled with (default: as XLA_FLAGS says, else true). ``xla_order``: bags are
    rewritten only where the kernel adds their rows in XLA:CPU's order (False: the DAE
    machines, whose programs add them in order and are compared to a tolerance; the patterns
    are then ``DAE_PATTERNS`` unless ``patterns`` says otherwise)."""
    work = module.clone()
    cost = "env" if cost_model is None else ("on" if cost_model else "off")
    excess = (precision.excess_precision_from_env() if excess_precision is None
              else bool(excess_precision))
    result = RewriteClusters(group=group, group_concat=group_concat, canonical=canonical,
                             cost_model=cost,
                             assume_finite_tables=assume_finite_tables,
                             multi_output=multi_output,
                             fuse_optimizer=fuse_optimizer, xla_order=xla_order,
                             excess_precision=str(excess).lower()).run(work, patterns)
    if not result.clusters:
        result.module = module
    return result
