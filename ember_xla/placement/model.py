"""What placement works on: the machine, the tables and their batch, the index statistics and
the cost model, bundled once (``Workload``); and the predicted time of a plan per core, with
the contention of the shared global memory applied by a fluid model: while several cores
stream, each progresses at the rate the global bandwidth allows (shared in proportion to
demand), as the emulator's arbiter serves their transfers in time order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ember_xla.emulator.npu.workload import Bags, Table
from ember_xla.machines.npu import Machine, check_preload
from ember_xla.placement.cost import CostModel
from ember_xla.placement.plan import Plan
from ember_xla.placement.stats import TableStats, table_stats


@dataclasses.dataclass
class Workload:
    machine: Machine
    tables: list[Table]
    batches: list[Bags]
    stats: list[TableStats]
    cost: CostModel
    preload: str
    machine_name: str = "npu"

    def table_info(self) -> list[dict[str, Any]]:
        return [{"name": t.name, "rows": t.rows, "dim": t.dim, "bags": b.n_bags}
                for t, b in zip(self.tables, self.batches, strict=True)]


def workload(m: Machine, tables: Sequence[Table], batches: Sequence[Bags],
             preload: str | None = None, name: str = "npu",
             profile: Sequence[Bags] | None = None) -> Workload:
    """Bundle a model's batch for placement; ``profile``: another batch of the same
    distribution to rank hot rows and measure skew on (default: the batch itself)."""
    if len(tables) != len(batches) or profile is not None and len(profile) != len(tables):
        raise ValueError(f"{len(tables)} tables but {len(batches)} batches"
                         + ("" if profile is None else f" and {len(profile)} profiles"))
    for t, b in zip(tables, batches, strict=True):
        b.check(t)
    prof = list(profile) if profile is not None else [None] * len(tables)
    return Workload(m, list(tables), list(batches),
                    [table_stats(t, b, m, p) for t, b, p in zip(tables, batches, prof,
                                                                strict=True)],
                    CostModel(m), check_preload(preload or m.preload), name)


def core_costs(w: Workload, plan: Plan) -> tuple[list[float], list[float]]:
    """Uncontended predicted cycles and global-memory bytes per core."""
    cyc = [0.0] * plan.cores
    gm = [0.0] * plan.cores
    overlap = [0.0] * plan.cores        # the previous piece's drain under this one's setup
    for p in plan.pieces:
        s = w.stats[p.table]
        r = w.cost.rate(s, p.strategy, p.hot)
        n, b = s.ids_of(p.bag_start, p.bag_stop), p.bag_stop - p.bag_start
        cyc[p.core] += r.cycles(n, b) - overlap[p.core]
        overlap[p.core] = min(r.tail(n, b), w.machine.setup)
        gm[p.core] += r.gm_bytes(n, b) + 4 * (b + 1)
    if w.preload == "batch":
        for c in range(plan.cores):
            for t, rows in plan.core_resident(c).items():
                r = w.cost.rate(w.stats[t], "l1_ub", len(rows))
                cyc[c] += r.preload
                gm[c] += r.preload_gm
    return cyc, gm


def contended(times: list[float], gm_bytes: list[float], global_bpc: float) -> list[float]:
    """Finish times when cores share ``global_bpc`` bytes/cycle (fluid, proportional)."""
    left = {c: 1.0 for c, t in enumerate(times) if t > 0}
    out = [0.0] * len(times)
    now = 0.0
    while left:
        demand = sum(gm_bytes[c] / times[c] for c in left)
        speed = min(1.0, global_bpc / demand) if demand else 1.0
        c_next = min(left, key=lambda c: left[c] * times[c])
        dt = left[c_next] * times[c_next] / speed
        now += dt
        for c in list(left):
            left[c] -= dt * speed / times[c]
            if c == c_next or left[c] <= 1e-12:
                out[c] = now
                del left[c]
    return out


def predict(w: Workload, plan: Plan) -> list[float]:
    """Predicted cycles per core of ``plan`` (what the report and the tests compare)."""
    cyc, gm = core_costs(w, plan)
    return contended(cyc, gm, w.machine.global_bpc)
