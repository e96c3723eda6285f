"""The skew-aware asymmetric mapper ("ours").

Every table has candidate configurations: ``gm`` and ``gm_ub`` (nothing in L1) and ``l1`` /
``l1_ub`` with a hot set of ``h`` rows for every size of the table's ladder (16, 32, ... up to
what L1 holds, or the whole table). The cost model prices a piece of any size under each.

Packing for a target makespan ``M`` (wrap-around, as McNaughton's rule for splittable jobs):
tables in decreasing order of their best whole-table cost fill core 0 up to ``M``, then core 1,
...; a table that does not fit the rest of a core is split by batch — the bags that fit stay,
the others continue on the next core (a new piece, paying the fixed cost again). Each piece
picks the configuration minimising ``cycles + lambda x L1 bytes`` among those whose hot set
still fits that core's scratchpad (a table split over several cores replicates its hot rows in
each). ``M`` is found by bisection (the smallest that packs onto the cores); ``lambda`` (the
price of scratchpad bytes, so early tables do not take L1 for a small gain) is tried over a few
values; each packing is then improved by local search (``refine.py``: move whole pieces or
the tails of their bag ranges off the most loaded core, re-choose each core's configurations
as a knapsack over its scratchpad); the plan with the lowest predicted makespan, contention
included, wins."""

from __future__ import annotations

import time

from ember_xla.placement.baselines import greedy
from ember_xla.placement.cost import RESIDENT, Rate
from ember_xla.placement.model import Workload, predict
from ember_xla.placement.plan import Piece, Plan
from ember_xla.placement.refine import refine

LAMBDAS = (0.0, 0.02, 0.2)        # cycles per L1 byte


def candidates(w: Workload, t: int) -> list[tuple[str, int, Rate]]:
    s = w.stats[t]
    out = [("gm", 0, w.cost.rate(s, "gm", 0)), ("gm_ub", 0, w.cost.rate(s, "gm_ub", 0))]
    for h in s.ladder[1:]:
        out += [(k, h, w.cost.rate(s, k, h)) for k in ("l1", "l1_ub")]
    return out


def _piece_cost(w: Workload, r: Rate, n_ids: int, n_bags: int) -> float:
    return r.cycles(n_ids, n_bags) + (r.preload if w.preload == "batch" else 0.0)


def _fit(w: Workload, t: int, r: Rate, b: int, cap: float) -> int:
    """The largest bag stop ``e`` > b with cost of bags [b, e) <= cap (b if none fits)."""
    s = w.stats[t]
    lo, hi = b, s.n_bags
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _piece_cost(w, r, s.ids_of(b, mid), mid - b) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo


def pack(w: Workload, n: int, m_target: float, lam: float, order: list[int],
         cands: list[list[tuple[str, int, Rate]]]) -> list[Piece] | None:
    l1 = w.machine.l1_bytes
    load = [0.0] * n
    mem = [0] * n
    pieces: list[Piece] = []
    c = 0
    for t in order:
        s = w.stats[t]
        b = 0
        while b < s.n_bags or (s.n_bags == 0 and b == 0):
            if c >= n:
                return None
            cap = m_target - load[c]
            free = l1 - mem[c]
            best = None
            for k, h, r in cands[t]:
                if r.l1_bytes > free:
                    continue
                cost = _piece_cost(w, r, s.ids_of(b, s.n_bags), s.n_bags - b)
                if cost <= cap:       # the whole rest fits: cheapest (memory priced) wins
                    key = (0, cost + lam * r.l1_bytes)
                    e = s.n_bags
                else:                 # a split: the configuration covering most lookups
                    e = _fit(w, t, r, b, cap)
                    if e == b:
                        continue
                    key = (1, -s.ids_of(b, e) + lam * r.l1_bytes / max(r.per_id, 1e-9))
                    cost = _piece_cost(w, r, s.ids_of(b, e), e - b)
                if best is None or key < best[0]:
                    best = (key, k, h, r, e, cost)
            if best is None:
                c += 1
                continue
            _, k, h, r, e, cost = best
            pieces.append(Piece(t, b, e, c, k, h if RESIDENT[k] else 0))
            load[c] += cost
            mem[c] += r.l1_bytes
            if s.n_bags == 0:
                break
            b = e
            if b < s.n_bags:
                c += 1
    return pieces


def _resident(w: Workload, pieces: list[Piece]) -> dict[int, list[int]]:
    hmax: dict[int, int] = {}
    for p in pieces:
        if p.hot:
            hmax[p.table] = max(hmax.get(p.table, 0), p.hot)
    return {t: [int(r) for r in w.stats[t].hot_rows(h)] for t, h in hmax.items()}


def ours(w: Workload, cores: int | None = None, iterations: int = 18) -> Plan:
    t0 = time.perf_counter()
    n = cores or w.machine.cores
    cands = [candidates(w, t) for t in range(len(w.stats))]
    best_whole = [min(_piece_cost(w, r, s.ids_of(0, s.n_bags), s.n_bags)
                      for _, _, r in cands[t] if r.l1_bytes <= w.machine.l1_bytes)
                  for t, s in enumerate(w.stats)]
    order = sorted(range(len(w.stats)), key=lambda t: (-best_whole[t], t))
    fallback = greedy(w, n)
    best_plan: Plan | None = None
    for lam in LAMBDAS:
        lo = sum(best_whole) / n
        hi = max(max(fallback.predicted, default=0.0), lo) * 1.5 + 1.0
        found = None
        if pack(w, n, hi, lam, order, cands) is None:
            continue
        for _ in range(iterations):
            mid = (lo + hi) / 2
            got = pack(w, n, mid, lam, order, cands)
            if got is None:
                lo = mid
            else:
                hi, found = mid, got
            if hi - lo < 1e-3 * hi:
                break
        found = found or pack(w, n, hi, lam, order, cands)
        plan = Plan("auto", w.machine_name, n, w.preload, w.table_info(), found,
                    _resident(w, found))
        plan.predicted = predict(w, plan)
        if best_plan is None or max(plan.predicted) < max(best_plan.predicted):
            best_plan = plan
    if best_plan is not None:
        refined = Plan("auto", w.machine_name, n, w.preload, w.table_info(),
                       refine(w, n, best_plan.pieces, cands), {})
        refined.resident = _resident(w, refined.pieces)
        refined.pieces.sort(key=lambda p: (p.core, -w.cost.rate(
            w.stats[p.table], p.strategy, p.hot).l1_bytes, p.table))
        refined.predicted = predict(w, refined)
        if max(refined.predicted) < max(best_plan.predicted):
            best_plan = refined
    if best_plan is None or max(fallback.predicted) < max(best_plan.predicted):
        best_plan = Plan("auto", fallback.target, n, w.preload, fallback.tables,
                         fallback.pieces, fallback.resident, fallback.predicted)
    best_plan.mapper_seconds = time.perf_counter() - t0
    return best_plan


