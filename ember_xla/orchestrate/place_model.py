"""``ember-xla emulate MODEL --target=npu --placement=...``: a whole model's embedding clusters
placed on a multi-core NPU target and emulated, the rest of the model on XLA:CPU.

One XLA:CPU run of the rewritten module (native kernels) captures every cluster's operands and
results (``emulator/capture.py``); the clusters' tables and bags become one placement workload
(``from_model.py``), planned by the chosen policy and run on the NPU emulator. Each cluster's
outputs from the NPU must equal its native kernel's bit for bit (NaN positions equal), so the
model's outputs under the plan are the ones computed, whatever the plan; they are compared with
the original module's on XLA:CPU."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ember_xla.ir.graph import Module
from ember_xla.machines.config import Target
from ember_xla.placement.api import (
    PlacementReport,
    emulate_plan,
    format_report,
    machine,
    make_plan,
)
from ember_xla.placement.from_model import (
    ClusterTables,
    NotPlaceable,
    cluster_tables,
    placeable_clusters,
)
from ember_xla.placement.model import workload
from ember_xla.placement.plan import Plan
from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL


@dataclasses.dataclass
class PlacedRun:
    plan: Plan
    report: PlacementReport
    clusters: list[ClusterTables]
    fallback: list[tuple[str, str]]           # (cluster, why) run on the native kernel
    outputs: list[np.ndarray]                 # the model's outputs
    cluster_outputs: dict[str, list[np.ndarray]]
    verify: dict[str, Any]
    baselines: list[PlacementReport] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.verify["ok"])

    def table(self) -> str:
        names = {t.table.name: f"cluster %{c.spec.name} ({c.spec.kind}, {c.spec.combiner})"
                 for c in self.clusters for t in c.tables}
        lines = [format_report(self.report), "  tables:"]
        for c in self.clusters:
            for t in c.tables:
                lines.append(f"    {t.table.name:<24} {t.table.rows} x {t.table.dim} f32, "
                             f"{t.bags.n_bags} bags, {len(t.bags.ids)} lookups  "
                             f"{names[t.table.name]}")
        for name, why in self.fallback:
            lines.append(f"  cluster %{name}: on the native kernel (not on the NPU): {why}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        d = self.report.as_dict()
        d["total_cycles"] = self.report.makespan_cycles
        d["plan"] = self.plan.to_json()
        d["native_fallback"] = [{"cluster": n, "reason": w} for n, w in self.fallback]
        d["verify"] = self.verify
        d["baselines"] = [{"policy": b.policy, "makespan_cycles": b.makespan_cycles}
                          for b in self.baselines]
        return d


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical, except that NaN payloads may differ (their positions may not)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        if not np.array_equal(na, nb):
            return False
        a, b = np.where(na, 0, a), np.where(nb, 0, b)
    return a.tobytes() == b.tobytes()


def emulate_placed(original: Module, rewritten: Module, inputs: list[np.ndarray],
                   target: Target, placement: str, *, preload: str | None = None,
                   native_fallback: bool = False, baselines: bool = False,
                   verify_atol: float = VERIFY_ATOL, verify_rtol: float = VERIFY_RTOL
                   ) -> PlacedRun:
    """Place and emulate ``rewritten``'s clusters; ``baselines``: also emulate the symmetric
    and greedy plans (for the per-core load plot and the report)."""
    from ember_xla.emulator.capture import capture
    from ember_xla.runtime.compare import verify_outputs
    from ember_xla.runtime.execute import run_module

    m = machine(target)
    found = placeable_clusters(rewritten)
    if not found:
        raise NotPlaceable("the model has no embedding cluster to place")
    fallback = [(name, why) for spec, name, why in found if why is not None]
    if fallback and not native_fallback:
        name, why = fallback[0]
        raise NotPlaceable(f"cluster %{name}: the NPU cannot compute it: {why} "
                           "(--native_fallback runs it on the native kernel and reports it)")
    specs = [spec for spec, _, why in found if why is None and spec is not None]
    if not specs:
        raise NotPlaceable("no cluster of the model can run on the NPU: "
                           + "; ".join(f"%{n}: {w}" for n, w in fallback))
    cap = capture(rewritten, inputs)
    clusters = [cluster_tables(s, cap.operands[s.name]) for s in specs]
    tables = [t.table for c in clusters for t in c.tables]
    batches = [t.bags for c in clusters for t in c.tables]
    w = workload(m, tables, batches, preload, name=target.name)
    plan = make_plan(w, placement)
    # emulate_plan checks the plan against the workload (make_plan checked a loaded file too)
    pooled, report = emulate_plan(plan, tables, batches, m, w.preload, True)
    assert pooled is not None
    cluster_outputs, checks, pos = {}, [], 0
    for c in clusters:
        got = c.outputs(pooled[pos:pos + len(c.tables)])
        pos += len(c.tables)
        want = cap.results[c.spec.name]
        cluster_outputs[c.spec.name] = got
        checks.append({"custom_call": c.spec.name,
                       "equal": all(same_values(x, y) for x, y in zip(want, got, strict=True))})
    model_check = verify_outputs(run_module(original, inputs), cap.outputs, verify_atol,
                                 verify_rtol)
    model_ok = model_check["ok"]
    verify = {"model": model_check,
              "clusters_vs_native": checks,
              "ok": model_ok and all(x["equal"] for x in checks)}
    base = []
    if baselines:
        for policy in ("symmetric", "greedy"):
            if plan.policy != policy:
                base.append(emulate_plan(make_plan(w, policy), tables, batches, m, w.preload,
                                         False)[1])
    return PlacedRun(plan, report, clusters, fallback, cap.outputs, cluster_outputs, verify,
                     base)
