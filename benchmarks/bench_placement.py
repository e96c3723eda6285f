"""Placement of the MLPerf DLRM-DCNv2 tables on the 8-core NPU target: per index
distribution the emulated makespan of the symmetric (vendor) mapping, TorchRec-style greedy
and ours, with ratios; ours against the exact MILP optimum on small cases; the spread over
distributions; predicted vs emulated time per core; mapper time for 26 tables x 8 cores and
856 tables x 64 cores; outputs bit-identical under every plan; a PNG of per-core load.

    python benchmarks/bench_placement.py [--batch 256] [--plot placement_load.png]

All times are emulated cycles of configs/npu.toml (deterministic: no wall-clock noise) except
the mapper times (wall clock, median of repeats)."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np

from ember_xla.placement.api import emulate_plan, machine
from ember_xla.placement.baselines import greedy, symmetric
from ember_xla.placement.distributions import DISTRIBUTIONS, dlrm_batches, meta_like
from ember_xla.placement.mapper import ours
from ember_xla.placement.model import workload
from ember_xla.placement.optimum import optimum
from ember_xla.placement.plot import plot_loads

SMALL = [20, 21, 9, 11, 22, 4]       # the small exact case: 6 tables (the heaviest and some)


def per_core_error(rep) -> float:
    return max(abs(c.predicted_cycles / c.emulated_cycles - 1)
               for c in rep.cores if c.emulated_cycles)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--plot", default="placement_load.png")
    ap.add_argument("--target", default="npu")
    ap.add_argument("--milp_seconds", type=float, default=60.0)
    a = ap.parse_args()
    m = machine(a.target)
    print(f"target {a.target}: {m.cores} cores, L1 {m.l1_bytes // 1024} KiB, DMA latency "
          f"{m.latency:.0f} cycles, {m.outstanding} outstanding; batch {a.batch}; "
          "hot sets ranked on a profile batch, emulated on another batch of the distribution")
    print(f"\n{'distribution':<12} {'lookups':>8} {'symmetric':>11} {'greedy':>10} {'ours':>10}"
          f" {'sym/ours':>9} {'greedy/ours':>12}  max per-core |pred/emu-1| (sym, greedy, "
          "ours)")
    per_lookup: dict[str, list[float]] = {"symmetric": [], "greedy": [], "ours": []}
    absolute: dict[str, list[float]] = {"symmetric": [], "greedy": [], "ours": []}
    detail = None
    for dist in DISTRIBUTIONS:
        tables, (prof, batch) = dlrm_batches(dist, a.batch)
        w = workload(m, tables, batch, profile=prof)
        reps, outs = {}, {}
        for name, f in (("symmetric", symmetric), ("greedy", greedy), ("ours", ours)):
            plan = f(w)
            outs[name], reps[name] = emulate_plan(plan, tables, batch, m, profile=prof)
        same = all(np.array_equal(x, y) for name in ("greedy", "ours")
                   for x, y in zip(outs["symmetric"], outs[name], strict=True))
        if not same:
            raise SystemExit(f"{dist}: outputs differ between plans")
        n = sum(len(b.ids) for b in batch)
        ms = {k: r.makespan_cycles for k, r in reps.items()}
        for k in ms:
            per_lookup[k].append(ms[k] / n)
            absolute[k].append(ms[k])
        errs = ", ".join(f"{100 * per_core_error(reps[k]):.1f}%" for k in reps)
        print(f"{dist:<12} {n:>8} {ms['symmetric']:>11,.0f} {ms['greedy']:>10,.0f} "
              f"{ms['ours']:>10,.0f} {ms['symmetric'] / ms['ours']:>8.2f}x "
              f"{ms['greedy'] / ms['ours']:>11.2f}x  {errs}  outputs identical: {same}")
        if dist == "zipf1.05":
            detail = reps
    print("\nspread over distributions (max/min):")
    for k in per_lookup:
        print(f"  {k:<10} makespan {max(absolute[k]) / min(absolute[k]):.2f}x, cycles per "
              f"lookup {max(per_lookup[k]) / min(per_lookup[k]):.2f}x "
              f"({min(per_lookup[k]):.1f} .. {max(per_lookup[k]):.1f})")

    print("\npredicted vs emulated per core, zipf1.05 (cycles):")
    for k, r in detail.items():
        cells = "  ".join(f"{c.predicted_cycles / 1e3:.0f}k/{c.emulated_cycles / 1e3:.0f}k"
                          for c in r.cores)
        print(f"  {k:<10} {cells}")
    plot_loads(list(detail.values()), a.plot, "DLRM-DCNv2, Zipf 1.05, 8 cores")
    print(f"  per-core load: {a.plot}")

    tables, (prof, batch) = dlrm_batches("zipf1.05", a.batch)
    wb = workload(m, tables, batch, "batch", profile=prof)
    pb = ours(wb)
    _, rb = emulate_plan(pb, tables, batch, m, "batch", functional=False, profile=prof)
    print(f"\npreload per batch (zipf1.05, ours re-planned): makespan {rb.makespan_cycles:,.0f}"
          f" cycles, predicted {max(pb.predicted):,.0f}, max per-core |pred/emu-1| "
          f"{100 * per_core_error(rb):.1f}% (vs {detail['ours'].makespan_cycles:,.0f} with the "
          f"preload once per model load, {detail['ours'].preload_cycles:,.0f} cycles)")

    small = dataclasses.replace(m, cores=3)
    print(f"\nexact optimum (HiGHS MILP), {len(SMALL)} tables x {small.cores} cores, batch "
          f"{a.batch // 2}:")
    for dist in DISTRIBUTIONS:
        tables, (prof, batch) = dlrm_batches(dist, a.batch // 2)
        sel = lambda xs: [xs[i] for i in SMALL]  # noqa: E731
        w = workload(small, sel(tables), sel(batch), profile=sel(prof))
        po = ours(w)
        t0 = time.perf_counter()
        pm = optimum(w, time_limit=a.milp_seconds)
        ts = time.perf_counter() - t0
        eo = emulate_plan(po, sel(tables), sel(batch), small, functional=False)[1]
        em = emulate_plan(pm, sel(tables), sel(batch), small, functional=False)[1]
        print(f"  {dist:<12} ours {eo.makespan_cycles:>9,.0f}  optimum {em.makespan_cycles:>9,.0f}"
              f"  ours/optimum {eo.makespan_cycles / em.makespan_cycles:.3f} (predicted "
              f"{max(po.predicted) / max(pm.predicted):.3f})  MILP {pm.solver['status']}, gap "
              f"{100 * pm.solver['mip_gap']:.2f}%, {ts:.1f} s")

    tables, (prof, batch) = dlrm_batches("zipf1.05", a.batch)
    w = workload(m, tables, batch, profile=prof)
    t26 = statistics.median(ours(w).mapper_seconds for _ in range(5))
    t0 = time.perf_counter()
    tables, batch = meta_like(856, batch=64)
    big = machine(a.target, cores=64)
    wbig = workload(big, tables, batch)
    t_stats = time.perf_counter() - t0
    pbig = ours(wbig)
    print(f"\nmapper time: 26 tables x 8 cores {t26 * 1e3:.0f} ms (median of 5); 856 tables x "
          f"64 cores {pbig.mapper_seconds:.2f} s (+ {t_stats:.2f} s to make the synthetic "
          f"batch and its statistics), {len(pbig.pieces)} pieces, predicted makespan "
          f"{max(pbig.predicted):,.0f} cycles (core loads {min(pbig.predicted):,.0f} .. "
          f"{max(pbig.predicted):,.0f})")


if __name__ == "__main__":
    main()
