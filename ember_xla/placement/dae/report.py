"""What a placed run on DAE cores reports: per core the emulated and predicted cycles, what
bounds it, its DRAM traffic and hit rates; per cluster its pieces (core, rows, variant,
predicted and emulated cycles); the text table, the JSON form, the PNG of per-core load and the
Perfetto trace (one track group per core, one slice per piece)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ember_xla.emulator.cores import CoresTiming
from ember_xla.machines.config import Target
from ember_xla.placement.dae.cost import piece_cost
from ember_xla.placement.dae.plan import DaePlan
from ember_xla.placement.dae.workload import ClusterWork
from ember_xla.placement.plot import save_png
from ember_xla.util import strict_json


def piece_rows(t: Target, works: Sequence[ClusterWork], plan: DaePlan, timing: CoresTiming
               ) -> list[dict[str, Any]]:
    """Per piece: where, what, predicted alone and emulated (its span on its core)."""
    out, last = [], [0.0] * plan.cores
    for p, end in zip(plan.pieces, timing.ends, strict=True):
        c = works[p.cluster]
        pred = piece_cost(t, c.load(p.variant, p.start, p.stop), [1.0] * len(t.caches))
        out.append({"cluster": p.cluster, "custom_call": c.name, "core": p.core,
                    "rows": [p.start, p.stop], "variant": p.variant,
                    "predicted_alone_cycles": pred.cycles, "predicted_bound": pred.bound,
                    "emulated_cycles": end - last[p.core]})
        last[p.core] = end
    return out


def core_rows(plan: DaePlan, timing: CoresTiming) -> list[dict[str, Any]]:
    rows = []
    for k, r in enumerate(timing.cores):
        pred = plan.predicted[k] if k < len(plan.predicted) else 0.0
        rows.append({"core": k, "emulated_cycles": r.cycles, "predicted_cycles": pred,
                     "predicted_error": (pred - r.cycles) / r.cycles if r.cycles else 0.0,
                     "bound": r.bound, "dram_bytes": r.dram_bytes,
                     "hit_rate": r.cache_hit_rate,
                     "pieces": sum(1 for p in plan.pieces if p.core == k)})
    return rows


def as_dict(t: Target, works: Sequence[ClusterWork], plan: DaePlan, timing: CoresTiming
            ) -> dict[str, Any]:
    return {"target": t.name, "cores": plan.cores, "policy": plan.policy,
            "makespan_cycles": timing.makespan,
            "makespan_seconds": timing.makespan / (t.clock_ghz * 1e9),
            "predicted_makespan_cycles": plan.predicted_makespan,
            "predicted_bound": plan.bound, "per_core": core_rows(plan, timing),
            "pieces": piece_rows(t, works, plan, timing),
            "variants_dropped": {c.name: c.dropped for c in works if c.dropped},
            "whole_only": {c.name: c.whole_reason for c in works if c.whole_reason},
            "plan": plan.as_dict()}


def table(t: Target, works: Sequence[ClusterWork], plan: DaePlan, timing: CoresTiming) -> str:
    lines = [f"{plan.policy} placement on {t.name}: {len(plan.pieces)} piece(s) of "
             f"{len(works)} cluster(s) on {plan.cores} core(s); makespan "
             f"{timing.makespan:,.0f} cycles (predicted {plan.predicted_makespan:,.0f}, "
             f"{plan.bound})",
             "  core  emulated cycles  predicted  error   bound            DRAM bytes  pieces"]
    for r in core_rows(plan, timing):
        lines.append(f"  {r['core']:>4}  {r['emulated_cycles']:>15,.0f}  "
                     f"{r['predicted_cycles']:>9,.0f}  {r['predicted_error']:>+6.1%}  "
                     f"{r['bound']:<15}  {r['dram_bytes']:>10,}  {r['pieces']:>6}")
    for c in works:
        if c.whole_reason is not None:
            lines.append(f"  %{c.name} runs whole: {c.whole_reason}")
    lines.append("  pieces (cluster, rows, variant -> core: emulated cycles):")
    for p in piece_rows(t, works, plan, timing):
        lines.append(f"    %{p['custom_call']:<28} rows {p['rows'][0]}..{p['rows'][1]:<8} "
                     f"{p['variant']:<8} -> core {p['core']}: {p['emulated_cycles']:,.0f}")
    return "\n".join(lines)


def write_trace(path: str | Path, t: Target, works: Sequence[ClusterWork], plan: DaePlan,
                timing: CoresTiming) -> int:
    """Chrome trace JSON: one process (track group) per core, a slice per piece; returns the
    number of events."""
    us = 1.0 / (t.clock_ghz * 1e3)
    events: list[dict[str, Any]] = []
    for k in range(plan.cores):
        events.append({"ph": "M", "name": "process_name", "pid": k + 1,
                       "args": {"name": f"core {k}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": k + 1, "tid": 1,
                       "args": {"name": "pieces"}})
    last = [0.0] * plan.cores
    for p, row in zip(plan.pieces, piece_rows(t, works, plan, timing), strict=True):
        end = last[p.core] + row["emulated_cycles"]
        events.append({"ph": "X", "pid": p.core + 1, "tid": 1, "ts": last[p.core] * us,
                       "dur": row["emulated_cycles"] * us,
                       "name": f"%{row['custom_call']} [{p.start}, {p.stop}) {p.variant}",
                       "args": {"cycles": row["emulated_cycles"],
                                "predicted_alone_cycles": row["predicted_alone_cycles"]}})
        last[p.core] = end
    from ember_xla.util.atomic import write_atomic

    write_atomic(str(path), strict_json.dumps({"traceEvents": events,
                                               "displayTimeUnit": "ns"}) + "\n")
    return len(events)


def plot_cores(runs: Sequence[tuple[DaePlan, CoresTiming]], path: str | Path,
               title: str = "") -> None:
    """PNG: one panel per plan, a bar per core (emulated cycles), its prediction marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), squeeze=False)
    top = max(tm.makespan for _, tm in runs) * 1.08 or 1.0
    for ax, (plan, tm) in zip(axes[0], runs, strict=True):
        for k, r in enumerate(tm.cores):
            ax.bar(k, r.cycles, color="#4c72b0", width=0.8)
            if k < len(plan.predicted):
                ax.plot([k - 0.4, k + 0.4], [plan.predicted[k]] * 2, "k-", lw=1)
        ax.set_title(f"{plan.policy}: {tm.makespan:,.0f} cycles", fontsize=9)
        ax.set_xlabel("core")
        ax.set_ylim(0, top)
    axes[0][0].set_ylabel("emulated cycles (line: predicted)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path)
