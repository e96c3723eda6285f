"""The mappers of clusters onto DAE cores, and the two baselines.

- ``symmetric``: every cluster's batch split evenly over all cores (a cluster that cannot be
  split goes whole to the cores in turn), the default variant (-O3, VL 8) everywhere: the
  mapping a compiler makes that knows neither the tables nor their ids.
- ``greedy``: TorchRec-style: whole clusters, priced by bytes (lookups x row bytes, skew-blind),
  largest first onto the least-loaded core, the default variant.
- ``auto``: per cluster the variant the cost model (``cost.py``) prices lowest; then
  McNaughton's wrap-around packing for a target makespan ``M``: clusters in decreasing cost
  fill core 0 up to ``M``, then core 1, ...; a cluster that does not fit the rest of a core is
  split by batch where its lookups reach ``M`` (only clusters at core boundaries are split, so
  each core keeps few tables hot in its private caches). ``M`` is found by bisection on the
  per-lookup costs; the packings of a few ``M`` around it are priced with the full model
  (cache shares, DRAM floor) and the best is kept."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember_xla.machines.config import Target
from ember_xla.placement.dae.cost import piece_cost, predict
from ember_xla.placement.dae.plan import DaePiece, DaePlan
from ember_xla.placement.dae.shares import ids_prefix
from ember_xla.placement.dae.variants import DEFAULT
from ember_xla.placement.dae.workload import ClusterWork

POLICIES = ("auto", "symmetric", "greedy")


def price(t: Target, works: Sequence[ClusterWork], plan: DaePlan) -> DaePlan:
    loads = [(p.core, works[p.cluster].load(p.variant, p.start, p.stop)) for p in plan.pieces]
    plan.predicted, plan.predicted_makespan, plan.bound = predict(t, plan.cores, loads)
    return plan


def symmetric(t: Target, works: Sequence[ClusterWork], cores: int) -> DaePlan:
    pieces, turn = [], 0
    for c in works:
        if c.whole_reason is not None or c.rows < cores:
            if c.rows:
                pieces.append(DaePiece(c.index, 0, c.rows, turn % cores, DEFAULT))
                turn += 1
            continue
        b = [round(k * c.rows / cores) for k in range(cores + 1)]
        pieces += [DaePiece(c.index, b[k], b[k + 1], k, DEFAULT) for k in range(cores)
                   if b[k + 1] > b[k]]
    return price(t, works, DaePlan("symmetric", t.name, cores, _ordered(pieces)))


def greedy(t: Target, works: Sequence[ClusterWork], cores: int) -> DaePlan:
    def nbytes(c: ClusterWork) -> float:
        prof = c.profiles[DEFAULT]
        return float(ids_prefix(c.spec, c.operands)[-1]) * prof.row_lines

    load = [0.0] * cores
    pieces = []
    for c in sorted((c for c in works if c.rows), key=lambda c: (-nbytes(c), c.index)):
        k = min(range(cores), key=lambda j: (load[j], j))
        load[k] += nbytes(c)
        pieces.append(DaePiece(c.index, 0, c.rows, k, DEFAULT))
    return price(t, works, DaePlan("greedy", t.name, cores, _ordered(pieces)))


def _alone(t: Target, c: ClusterWork, variant: str) -> float:
    """The cluster's predicted cycles alone on the machine (every cache level its own)."""
    return piece_cost(t, c.load(variant, 0, c.rows), [1.0] * len(t.caches)).cycles


def auto(t: Target, works: Sequence[ClusterWork], cores: int) -> DaePlan:
    live = [c for c in works if c.rows]
    best = {c.index: min(c.variants, key=lambda v: (_alone(t, c, v), v != DEFAULT))
            for c in live}
    cost = {c.index: _alone(t, c, best[c.index]) for c in live}
    order = sorted(live, key=lambda c: (-cost[c.index], c.index))
    prefix = {c.index: ids_prefix(c.spec, c.operands) for c in live}

    def pack(m: float) -> list[DaePiece] | None:
        pieces, k, room = [], 0, m
        for c in order:
            pre, total = prefix[c.index].astype(np.float64), cost[c.index]
            per_id = total / max(pre[-1], 1.0)
            start = 0
            while start < c.rows:
                if k >= cores:
                    return None
                left = (pre[c.rows] - pre[start]) * per_id if pre[-1] else total
                if left <= room:
                    pieces.append(DaePiece(c.index, start, c.rows, k, best[c.index]))
                    room -= left
                    break
                stop = start
                if c.whole_reason is None and per_id > 0:
                    stop = int(np.searchsorted(pre, pre[start] + room / per_id, "right")) - 1
                    stop = min(max(stop, start), c.rows)
                if stop == start:
                    if room >= m:
                        return None          # not even one row fits an empty core
                    k, room = k + 1, m       # try it on the next core
                    continue
                pieces.append(DaePiece(c.index, start, stop, k, best[c.index]))
                start = stop
                k, room = k + 1, m
        return pieces

    lo, hi = sum(cost.values()) / cores, sum(cost.values()) + 1.0
    hi = max(hi, max(cost.values(), default=0.0))
    for _ in range(40):
        mid = (lo + hi) / 2
        if pack(mid) is None:
            lo = mid
        else:
            hi = mid
    plans = []
    for f in (1.0, 1.02, 1.05, 1.1):
        p = pack(hi * f)
        if p is not None:
            plans.append(price(t, works, DaePlan("auto", t.name, cores, _ordered(p))))
    if not plans:  # pragma: no cover - hi always packs
        raise AssertionError("the bisection's upper bound does not pack")
    return min(plans, key=lambda p: p.predicted_makespan)


def _ordered(pieces: list[DaePiece]) -> list[DaePiece]:
    return sorted(pieces, key=lambda p: (p.core, p.cluster, p.start))


def make_plan(policy: str, t: Target, works: Sequence[ClusterWork], cores: int) -> DaePlan:
    if policy not in POLICIES:
        raise ValueError(f"--placement={policy}: expected auto, symmetric, greedy or a plan "
                         "file (.json)")
    return {"auto": auto, "symmetric": symmetric, "greedy": greedy}[policy](t, works, cores)
