"""The two baselines placement is compared with. ``symmetric``: every table's batch split evenly
over all cores, every piece row-at-a-time from global memory (the vendor compiler's mapping in
the seed paper). ``greedy``: TorchRec-style — whole tables sorted by predicted cost, each given
to the least-loaded core that has room; its kernel choice is skew-blind: a table goes to L1
(``l1_ub``) only if all of it fits, else it is staged from global memory (``gm_ub``)."""

from __future__ import annotations

from ember_xla.placement.model import Workload, predict
from ember_xla.placement.plan import Piece, Plan


def _plan(w: Workload, policy: str, cores: int, pieces: list[Piece],
          resident: dict[int, list[int]]) -> Plan:
    p = Plan(policy, w.machine_name, cores, w.preload, w.table_info(), pieces, resident)
    p.predicted = predict(w, p)
    return p


def symmetric(w: Workload, cores: int | None = None) -> Plan:
    n = cores or w.machine.cores
    pieces = []
    for t, s in enumerate(w.stats):
        bounds = [round(k * s.n_bags / n) for k in range(n + 1)]
        pieces += [Piece(t, bounds[c], bounds[c + 1], c, "gm") for c in range(n)
                   if bounds[c + 1] > bounds[c]]
    return _plan(w, "symmetric", n, pieces, {})


def whole_table_cost(w: Workload, t: int, strategy: str, h: int) -> float:
    s = w.stats[t]
    r = w.cost.rate(s, strategy, h)
    return r.cycles(s.n_ids, s.n_bags) + (r.preload if w.preload == "batch" else 0.0)


def greedy(w: Workload, cores: int | None = None) -> Plan:
    n = cores or w.machine.cores
    m = w.machine
    choice = []
    for t, s in enumerate(w.stats):
        fits = s.rows * s.row_bytes <= m.l1_bytes
        k = ("l1_ub", s.rows) if fits else ("gm_ub", 0)
        choice.append((whole_table_cost(w, t, *k), t, k))
    load = [0.0] * n
    mem = [0] * n
    pieces, resident = [], {}
    for _, t, (strat, h) in sorted(choice, key=lambda x: (-x[0], x[1])):
        s = w.stats[t]
        order = sorted(range(n), key=lambda c: (load[c], c))
        if strat == "l1_ub":
            room = [c for c in order if mem[c] + h * s.row_bytes <= m.l1_bytes]
            if room:
                c = room[0]
                mem[c] += h * s.row_bytes
                resident[t] = list(range(s.rows))
            else:
                c, strat, h = order[0], "gm_ub", 0
        else:
            c = order[0]
        load[c] += whole_table_cost(w, t, strat, h)
        pieces.append(Piece(t, 0, s.n_bags, c, strat, h))
    pieces.sort(key=lambda p: (p.core, p.table))
    return _plan(w, "greedy", n, pieces, resident)
