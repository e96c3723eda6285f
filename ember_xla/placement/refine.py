"""Local search after packing (part of the mapper): repeatedly take the most loaded core and
move work off it — a whole piece, or the tail of a piece's bag range (the split point found by
bisection to balance the two cores) — to another core, re-choosing the moved part's
configuration for the scratchpad room there; then re-choose every core's configurations as a
small knapsack (start without L1, take the upgrade with the best gain per byte while it
fits). A move is kept only if it lowers the larger of the two cores' loads below the current
makespan. Loads are the cost model's (pieces on a core add up; the preload when per batch)."""

from __future__ import annotations

from ember_xla.placement.cost import RESIDENT
from ember_xla.placement.model import Workload
from ember_xla.placement.plan import Piece


def _cost(w: Workload, cands, p: Piece) -> float:
    s = w.stats[p.table]
    r = w.cost.rate(s, p.strategy, p.hot)
    return r.cycles(s.ids_of(p.bag_start, p.bag_stop), p.bag_stop - p.bag_start) + (
        r.preload if w.preload == "batch" and r.l1_bytes else 0.0)


def _mem(w: Workload, p: Piece) -> int:
    return p.hot * w.stats[p.table].row_bytes if RESIDENT[p.strategy] else 0


def _best_config(w: Workload, cands, t: int, b0: int, b1: int, free: int) -> Piece:
    best = None
    for k, h, r in cands[t]:
        if r.l1_bytes > free:
            continue
        p = Piece(t, b0, b1, -1, k, h if RESIDENT[k] else 0)
        c = _cost(w, cands, p)
        if best is None or c < best[0]:
            best = (c, p)
    return best[1]


def reoptimize_core(w: Workload, cands, pieces: list[Piece]) -> list[Piece]:
    """Configurations of one core's pieces: greedy knapsack over the scratchpad."""
    cur = [_best_config(w, cands, p.table, p.bag_start, p.bag_stop, 0) for p in pieces]
    free = w.machine.l1_bytes
    while True:
        best = None
        for i, p in enumerate(cur):
            base = _cost(w, cands, p)
            for k, h, r in cands[p.table]:
                extra = r.l1_bytes - _mem(w, p)
                if not r.l1_bytes or extra <= 0 or extra > free:
                    continue
                q = Piece(p.table, p.bag_start, p.bag_stop, -1, k, h)
                gain = base - _cost(w, cands, q)
                if gain > 0 and (best is None or gain / extra > best[0]):
                    best = (gain / extra, i, q, extra)
        if best is None:
            break
        _, i, q, extra = best
        cur[i] = q
        free -= extra
    return [Piece(p.table, p.bag_start, p.bag_stop, o.core, p.strategy, p.hot)
            for p, o in zip(cur, pieces, strict=True)]


def refine(w: Workload, n: int, pieces: list[Piece], cands, rounds: int = 100,
           targets: int = 3) -> list[Piece]:
    """Improve a packing; ``targets``: the least loaded cores tried for each move."""
    by_core: list[list[Piece]] = [[] for _ in range(n)]
    for p in pieces:
        by_core[p.core].append(p)
    by_core = [reoptimize_core(w, cands, ps) if ps else ps for ps in by_core]
    load = [sum(_cost(w, cands, p) for p in ps) for ps in by_core]
    l1 = w.machine.l1_bytes
    for _ in range(rounds):
        c = max(range(n), key=lambda i: load[i])
        top = load[c]
        best = None
        for i, p in enumerate(by_core[c]):
            pc = _cost(w, cands, p)
            for d in sorted(range(n), key=lambda i: load[i])[:targets]:
                if d == c or load[d] >= top:
                    continue
                free = l1 - sum(_mem(w, q) for q in by_core[d])
                lo, hi = p.bag_start, p.bag_stop - 1   # moved tail: [e, stop), e in [lo, hi]
                if p.bag_stop - p.bag_start == 0:
                    continue
                cand = None
                while lo <= hi:                         # bisection on the split point
                    e = (lo + hi) // 2
                    moved = _best_config(w, cands, p.table, e, p.bag_stop, free)
                    kept = Piece(p.table, p.bag_start, e, c, p.strategy, p.hot)
                    lc = top - pc + (_cost(w, cands, kept) if e > p.bag_start else 0.0)
                    ld = load[d] + _cost(w, cands, moved)
                    if cand is None or max(lc, ld) < cand[0]:
                        cand = (max(lc, ld), e, kept, moved, lc, ld)
                    if ld > lc:
                        lo = e + 1
                    else:
                        hi = e - 1
                if cand and cand[0] < top * (1 - 1e-4) and (best is None or cand[0] < best[0]):
                    best = (*cand, i, d)
        if best is None:
            break
        _, e, kept, moved, lc, ld, i, d = best
        by_core[c] = by_core[c][:i] + ([kept] if e > kept.bag_start else []) + by_core[c][i + 1:]
        by_core[d] = by_core[d] + [Piece(moved.table, moved.bag_start, moved.bag_stop, d,
                                         moved.strategy, moved.hot)]
        for x in (c, d):
            by_core[x] = reoptimize_core(w, cands, by_core[x]) if by_core[x] else by_core[x]
            load[x] = sum(_cost(w, cands, p) for p in by_core[x])
    return [p for ps in by_core for p in ps]
