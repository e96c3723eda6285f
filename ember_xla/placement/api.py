"""The entry points other parts call: ``place`` makes (or loads and checks) a plan for a
model's tables and batch on an NPU target; ``emulate_plan`` runs it on the NPU emulator and
returns the outputs with a per-core report (predicted and emulated cycles). The ``emulate``
command's ``--placement`` hook is meant to call exactly these two."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ember_xla.emulator.npu.run import NpuReport, emulate
from ember_xla.emulator.npu.workload import Bags, Table
from ember_xla.machines.config import Target, load_target
from ember_xla.machines.npu import L1_STRATEGIES, Machine, machine_of
from ember_xla.placement.baselines import greedy, symmetric
from ember_xla.placement.mapper import ours
from ember_xla.placement.model import Workload, predict, workload
from ember_xla.placement.plan import Plan, PlanError, load_plan

POLICIES = ("auto", "symmetric", "greedy", "optimum")


def machine(target: Target | Machine | str | Path, cores: int | None = None) -> Machine:
    m = target if isinstance(target, Machine) else machine_of(
        target if isinstance(target, Target) else load_target(target))
    if cores is not None:
        if not 1 <= cores:
            raise ValueError(f"cores: expected a positive count, got {cores}")
        m = dataclasses.replace(m, cores=cores)
    return m


def make_plan(w: Workload, placement: str, cores: int | None = None) -> Plan:
    """A plan by policy name, or loaded from a JSON file and checked against ``w``."""
    if placement == "auto":
        return ours(w, cores)
    if placement == "symmetric":
        return symmetric(w, cores)
    if placement == "greedy":
        return greedy(w, cores)
    if placement == "optimum":
        from ember_xla.placement.optimum import optimum
        return optimum(w, cores)
    if not placement.endswith(".json") and not Path(placement).exists():
        raise PlanError(f"--placement={placement}: expected {', '.join(POLICIES)} or a plan "
                        ".json file")
    plan = load_plan(placement)
    plan.check(w.machine, w.table_info())
    plan.predicted = predict(w, plan)
    return plan


def place(tables: Sequence[Table], batches: Sequence[Bags],
          target: Target | Machine | str | Path = "npu", placement: str = "auto",
          profile: Sequence[Bags] | None = None, preload: str | None = None,
          cores: int | None = None) -> Plan:
    """The placement of ``tables`` (their ``batches``) on ``target``: ``auto`` (ours),
    ``symmetric``, ``greedy``, ``optimum`` (MILP; small cases) or a plan file. The plan is
    checked (every bag once, scratchpad capacity) before it is returned."""
    m = machine(target, cores)
    w = workload(m, tables, batches, preload, profile=profile)
    plan = make_plan(w, placement, cores)
    plan.check(m, w.table_info())
    return plan


@dataclasses.dataclass
class CoreLine:
    core: int
    predicted_cycles: float
    emulated_cycles: float
    pieces: list[dict[str, Any]]


@dataclasses.dataclass
class PlacementReport:
    policy: str
    target: str
    preload: str
    makespan_cycles: float
    makespan_seconds: float
    predicted_makespan: float
    preload_cycles: float
    global_utilization: float
    mapper_seconds: float
    cores: list[CoreLine]
    npu: NpuReport
    in_sample: list[str] = dataclasses.field(default_factory=list)  # tables whose hot sets
    #   were ranked on this very batch (no profile batch): their L1 hits are in sample

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["npu"] = self.npu.as_dict()
        return d


def emulate_plan(plan: Plan, tables: Sequence[Table], batches: Sequence[Bags],
                 target: Target | Machine | str | Path = "npu", preload: str | None = None,
                 functional: bool = True, profile: Sequence[Bags] | None = None
                 ) -> tuple[list[np.ndarray] | None, PlacementReport]:
    """Run ``plan`` on the NPU emulator: pooled outputs per table (bit-identical under every
    plan) and the report — per core the pieces, predicted and emulated cycles (``profile``:
    the batch the plan's statistics came from, for the per-piece predictions)."""
    m = machine(target)
    w = workload(m, tables, batches, preload or plan.preload, profile=profile)
    plan.check(m, w.table_info())
    if not plan.predicted:
        plan.predicted = predict(w, plan)
    progs, resident = plan.programs()
    outs, rep = emulate(m, tables, batches, progs, resident, w.preload, functional)
    lines = []
    for c in range(plan.cores):
        pieces = []
        for p in plan.pieces:
            if p.core == c:
                s = w.stats[p.table]
                r = w.cost.rate(s, p.strategy, p.hot)
                pieces.append({"table": tables[p.table].name, "bags": [p.bag_start, p.bag_stop],
                               "strategy": p.strategy, "hot_rows": p.hot,
                               "predicted_cycles": r.cycles(s.ids_of(p.bag_start, p.bag_stop),
                                                            p.bag_stop - p.bag_start)})
        lines.append(CoreLine(c, plan.predicted[c], rep.cores[c].cycles, pieces))
    flattered = sorted({p.table for p in plan.pieces if p.strategy in L1_STRATEGIES
                        and 0 < p.hot < tables[p.table].rows
                        and _own_top_rows(w, p.table, plan.resident[p.table][:p.hot])})
    return outs, PlacementReport(plan.policy, plan.target, rep.preload_mode,
                                 rep.makespan_cycles, rep.makespan_seconds,
                                 max(plan.predicted, default=0.0), rep.preload_cycles,
                                 rep.global_utilization, plan.mapper_seconds, lines, rep,
                                 [tables[t].name for t in flattered])


def _own_top_rows(w: Workload, t: int, rows: Sequence[int]) -> bool:
    """Whether ``rows`` are the top rows of table ``t``'s own batch (a hot set ranked on the
    batch it runs on, not on a profile batch)."""
    s = w.stats[t]
    return s.in_sample and np.array_equal(np.sort(np.asarray(rows, dtype=np.int64)),
                                          np.sort(s.hot_rows(len(rows))))


def format_report(r: PlacementReport) -> str:
    """The plan as text: per core its pieces (table, bags, strategy, hot rows), predicted and
    emulated cycles."""
    out = [f"placement {r.policy} on {r.target}: makespan {r.makespan_cycles:,.0f} cycles "
           f"({r.makespan_seconds * 1e6:.1f} us), predicted {r.predicted_makespan:,.0f}; "
           f"global memory {100 * r.global_utilization:.0f}% busy; preload per {r.preload}"
           + (f" ({r.preload_cycles:,.0f} cycles once, not in the makespan)"
              if r.preload == "model" else " (in the makespan)")
           + f"; mapper {r.mapper_seconds:.3f} s"]
    if r.in_sample:
        out.append(f"  note: hot sets of {len(r.in_sample)} table(s) ranked on this very batch "
                   "(no profile batch): their L1 hits are in sample, which flatters l1/l1_ub "
                   "(a deployment ranks hot rows on past batches)")
    for c in r.cores:
        err = (c.predicted_cycles / c.emulated_cycles - 1) * 100 if c.emulated_cycles else 0.0
        out.append(f"  core {c.core}: predicted {c.predicted_cycles:>12,.0f}  emulated "
                   f"{c.emulated_cycles:>12,.0f}  ({err:+.1f}%)")
        for p in c.pieces:
            hot = f" hot={p['hot_rows']}" if p["hot_rows"] else ""
            out.append(f"      {p['table']:<10} bags [{p['bags'][0]}, {p['bags'][1]})  "
                       f"{p['strategy']}{hot}")
    return "\n".join(out)
