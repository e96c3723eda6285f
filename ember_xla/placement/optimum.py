"""The exact optimum of small cases, as a mixed-integer program solved by HiGHS (``highspy``,
the ``placement`` extra). Per table ``t``, core ``c`` and configuration ``k`` (strategy and hot
set, the mapper's candidates): a share ``x[t,c,k]`` of the table's batch (continuous) and
``y[t,c,k]`` whether that piece exists (binary, at most one per table and core). Each table is
shared out completely; a core's scratchpad holds the hot sets of its pieces; its load — the
fixed cost of each piece plus its share of the variable cost (``Rate.linear``, an upper bound
of the cost model linear in the share) — is at most ``M``; minimise ``M``. The solution becomes
a plan by splitting each table's bags at the shares' cumulative lookups, so it is priced and
emulated like any other plan."""

from __future__ import annotations

import time

from ember_xla.placement.mapper import candidates
from ember_xla.placement.model import Workload, predict
from ember_xla.placement.plan import Piece, Plan


class SolverUnavailable(RuntimeError):
    pass


def _configs(w: Workload, t: int) -> list[tuple[str, int]]:
    """The mapper's candidates, the cheaper of ``l1``/``l1_ub`` for each hot-set size."""
    s = w.stats[t]
    best: dict[int, tuple[float, str]] = {}
    for k, h, r in candidates(w, t):
        cost = r.linear(s.n_ids, s.n_bags)
        if r.l1_bytes > w.machine.l1_bytes:
            continue
        key = h if k.startswith("l1") else -1 - len(best)
        if key not in best or cost < best[key][0]:
            best[key] = (cost, k)
    return [(k, max(h, 0)) for h, (_, k) in best.items()]


def optimum(w: Workload, cores: int | None = None, time_limit: float = 60.0) -> Plan:
    try:
        import highspy
    except ImportError:
        raise SolverUnavailable("the exact optimum needs highspy: pip install "
                                "'ember-xla[placement]'") from None
    t0 = time.perf_counter()
    n = cores or w.machine.cores
    hs = highspy.Highs()
    hs.setOptionValue("output_flag", False)
    hs.setOptionValue("time_limit", float(time_limit))
    hs.setOptionValue("mip_rel_gap", 1e-4)
    big_m = hs.addVariable(lb=0.0, obj=1.0)
    load = [[] for _ in range(n)]
    mem = [[] for _ in range(n)]
    xs: dict[tuple[int, int, int], object] = {}
    cfgs = [_configs(w, t) for t in range(len(w.stats))]
    for t, s in enumerate(w.stats):
        share = []
        for c in range(n):
            ys = []
            for i, (k, h) in enumerate(cfgs[t]):
                r = w.cost.rate(s, k, h)
                fixed = r.linear(0, 0) + (r.preload if w.preload == "batch" else 0.0)
                var = r.linear(s.n_ids, s.n_bags) - r.linear(0, 0)
                x = hs.addVariable(lb=0.0, ub=1.0)
                y = hs.addBinary()
                hs.addConstr(x - y <= 0)
                xs[t, c, i] = x
                share.append(x)
                ys.append(y)
                load[c].append(fixed * y + var * x)
                if r.l1_bytes:
                    mem[c].append(r.l1_bytes * y)
            hs.addConstr(sum(ys) <= 1)
        hs.addConstr(sum(share) == 1)
    for c in range(n):
        hs.addConstr(sum(load[c]) - big_m <= 0)
        if mem[c]:
            hs.addConstr(sum(mem[c]) <= w.machine.l1_bytes)
    hs.minimize(big_m)
    info = hs.getInfo()
    status = hs.modelStatusToString(hs.getModelStatus())
    if hs.getInfo().primal_solution_status != 2:
        raise RuntimeError(f"HiGHS found no feasible placement ({status})")
    pieces = []
    for t, s in enumerate(w.stats):
        parts = [(c, i, hs.val(xs[t, c, i])) for c in range(n) for i in range(len(cfgs[t]))
                 if hs.val(xs[t, c, i]) > 1e-7]
        acc, b = 0.0, 0
        for j, (c, i, f) in enumerate(parts):
            acc += f
            if j == len(parts) - 1:
                e = s.n_bags
            else:
                target = acc * s.n_ids
                e = int(min(s.n_bags, max(b, (s.cum_ids <= target + 1e-9).sum() - 1)))
            k, h = cfgs[t][i]
            if e > b or (s.n_bags == 0 and j == 0):
                pieces.append(Piece(t, b, e, c, k, h if k.startswith("l1") else 0))
            b = e
    pieces.sort(key=lambda p: (p.core, p.table))
    hmax: dict[int, int] = {}
    for p in pieces:
        if p.hot:
            hmax[p.table] = max(hmax.get(p.table, 0), p.hot)
    plan = Plan("optimum", w.machine_name, n, w.preload, w.table_info(), pieces,
                {t: [int(r) for r in w.stats[t].hot_rows(h)] for t, h in hmax.items()})
    plan.predicted = predict(w, plan)
    plan.mapper_seconds = time.perf_counter() - t0
    plan.solver = {"status": status, "objective": float(info.objective_function_value),
                   "mip_gap": float(info.mip_gap)}
    return plan
