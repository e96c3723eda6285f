"""The whole model on Ember's multi-core DAE machine (configs/tmu8.toml): the 26-table
MLPerf DLRM-DCNv2 embedding stage (D = 128, rows capped, fixed multi-hot pooling, ids uniform
or Zipf over a random permutation of each table's rows) and the built-in DLRM-style example,
written in JAX, and training steps of six of its tables (SGD, Adagrad, rowwise Adagrad: the
backward kinds ``sparse_sgd``, ``sparse_adagrad``, ``sparse_rowwise_adagrad`` cut by rows of
the table), rewritten, every cluster placed on 1, 2, 4, 8 cores and emulated together
(shared LLC and banked DRAM contended for). Printed per model and core count: the emulated
makespan of auto, symmetric and greedy placement side by side (and auto restricted to the
default -O3 VL-8 program, which symmetric and greedy use: what placement alone gains), auto's
scaling over 1 core and its efficiency, auto / symmetric and auto / greedy, the worst per-core
|predicted / emulated - 1| over all plans and what bounds auto's busiest core; every plan's
outputs verified bit for bit. On 8 cores also the memory-side headroom of auto's pieces (with
its variants, and with the default program only): the cost model's largest memory term
(address generation, latency, DRAM transfer) over the piece's execute term, which bounds what
a variant that only changes how rows reach the core could gain.

    python benchmarks/bench_multicore.py [--batch 256] [--cap 20000] [--plot mc_load.png]
        [--trace mc_trace.json] [--target tmu8|FILE.toml] [--example_batch 1024]
        [--train sgd,adagrad,rowwise_adagrad] [--train_batch 256] [--train_cap 20000]
    python benchmarks/bench_multicore.py --compile [--rounds 2]

Cycles are emulated (deterministic, no wall-clock noise). ``--compile`` times only the setup's
compile step instead: every variant of the stage's 26 clusters by ``lower_cluster`` (every
stage kept) vs ``lower_final`` with its shape-class cache (what placement uses), interleaved,
CPU and wall seconds."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import numpy as np

from ember_xla.examples import dlrm
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.emulate_cores import cluster_works, plan_for, run_plan
from ember_xla.orchestrate.rewrite_model import rewrite_for_placement
from ember_xla.placement.dae import report
from ember_xla.placement.dae.cost import memory_headroom
from ember_xla.placement.dae.shares import lookup_operand
from ember_xla.placement.dae.variants import DEFAULT
from ember_xla.placement.distributions import DLRM_POOLING, DLRM_ROWS, ZipfRows

POLICIES = ("auto", "symmetric", "greedy", "auto-O3")
CORES = (1, 2, 4, 8)


def mlperf_stage(batch: int, cap: int, alpha: float, seed: int = 0) -> tuple[Any, list[Any]]:
    rng = np.random.default_rng(seed)
    tables, ids, segs = [], [], []
    for rows, pool in zip(DLRM_ROWS, DLRM_POOLING, strict=True):
        r = min(rows, cap)
        tables.append((rng.standard_normal((r, 128)) * 0.1).astype(np.float32))
        ids.append(ZipfRows(rng, r, alpha).sample(rng, batch * pool).astype(np.int32))
        segs.append(np.repeat(np.arange(batch), pool).astype(np.int32))

    def stage(*args: Any) -> Any:
        import jax
        import jax.numpy as jnp

        k = len(tables)
        out = [jax.ops.segment_sum(jnp.take(args[t], args[k + 2 * t], axis=0),
                                   args[k + 2 * t + 1], num_segments=batch) for t in range(k)]
        return jnp.concatenate(out, axis=1)

    args = [*tables, *(x for pair in zip(ids, segs, strict=True) for x in pair)]
    return from_jax(stage, *args), args


def training(batch: int, cap: int, optimizer: str) -> tuple[Any, list[Any]]:
    """A training step of six MLPerf DLRM tables (bench_ladder's ``dlrm_train``: forward
    segment sums, the backward fused into the optimizer's update), rows capped at ``cap``."""
    import sys
    from pathlib import Path

    import jax

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ladder_workloads as lw

    fn, args = lw.dlrm_train(batch, optimizer=optimizer, row_cap=cap)
    return from_jax(fn, *args), [np.asarray(x) for x in jax.tree.leaves(args)]


def example(batch: int) -> tuple[Any, list[Any]]:
    args = dlrm.flat_args(dlrm.make_params(), dlrm.make_batch(batch=batch))
    return from_jax(dlrm.jax_entry, *args), list(args)


def machine_bound(t: Any, timing: Any) -> str:
    """DRAM bandwidth when the run used >= 85% of it, else what bounds the busiest core."""
    secs = timing.makespan / (t.clock_ghz * 1e9)
    util = sum(r.dram_bytes for r in timing.cores) / secs / (t.dram.bandwidth_gb_per_s * 1e9)
    if util >= 0.85:
        return f"DRAM bandwidth ({util:.0%})"
    return f"{max(timing.cores, key=lambda r: r.cycles).bound} (DRAM {util:.0%})"


def run_model(name: str, model: Any, args: list[Any], base: Any, plot: str | None,
              trace: str | None) -> dict[str, Any]:
    from ember_xla.emulator.capture import capture

    t0 = time.perf_counter()
    rewritten = rewrite_for_placement(model.module).module
    cap = capture(rewritten, args)
    works, _ = cluster_works(rewritten, cap, base, False)
    default_only = [dataclasses.replace(w, profiles={DEFAULT: w.profiles[DEFAULT]})
                    for w in works]
    lookups = sum(int(np.asarray(w.operands[lookup_operand(w.spec, 0)]).size) for w in works)
    print(f"\n== {name}: {len(works)} clusters, {lookups:,} lookups "
          f"(setup {time.perf_counter() - t0:.1f} s)")
    print(f"  {'cores':>5} " + " ".join(f"{p:>14}" for p in POLICIES)
          + "  auto scaling  efficiency  auto/sym  auto/greedy  pred err (auto, all)  bound")
    results: dict[int, dict[str, Any]] = {}
    for n in CORES:
        target = dataclasses.replace(base, cores=n)
        row = {}
        for policy in POLICIES:
            ws = default_only if policy == "auto-O3" else works
            plan = plan_for(target, ws, policy.removesuffix("-O3"))
            timing, checks = run_plan(target, ws, plan)
            assert all(c["bitwise_equal"] for c in checks), (name, n, policy)
            err = max((abs(plan.predicted[k] / r.cycles - 1)
                       for k, r in enumerate(timing.cores) if r.cycles), default=0.0)
            row[policy] = (plan, timing, err)
        results[n] = row
        a, s, g, _ = (row[p][1].makespan for p in POLICIES)
        one = results[1]["auto"][1].makespan
        print(f"  {n:>5} " + " ".join(f"{row[p][1].makespan:>14,.0f}" for p in POLICIES)
              + f"  {one / a:>11.2f}x  {one / a / n:>9.0%}  {s / a:>7.2f}x  {g / a:>10.2f}x"
              f"  {row['auto'][2]:>8.1%}, {max(row[p][2] for p in POLICIES):>6.1%}"
              f"        {machine_bound(base, row['auto'][1])}")
    plan, timing, _ = results[8]["auto"]
    t8 = dataclasses.replace(base, cores=8)
    dram = sum(r.dram_bytes for r in timing.cores)
    print(f"  8 cores, auto: DRAM {dram / 1e6:.1f} MB in {timing.makespan:,.0f} cycles = "
          f"{dram / (timing.makespan / (base.clock_ghz * 1e9)) / 1e9:.1f} GB/s of "
          f"{base.dram.bandwidth_gb_per_s:.1f}; variants: "
          + ", ".join(sorted({p.variant for p in plan.pieces})))
    heads = []
    for policy in ("auto", "auto-O3"):
        ws = default_only if policy == "auto-O3" else works
        pl = results[8][policy][0]
        loads = [(p.core, ws[p.cluster].load(p.variant, p.start, p.stop)) for p in pl.pieces]
        heads.append(f"{policy} {memory_headroom(t8, 8, loads):.2f}")
    print("  8 cores, memory-side headroom (largest memory term / execute term of a piece; "
          "< 1: pinning hot rows or a deeper prefetch cannot shorten any piece): "
          + ", ".join(heads))
    if plot:
        report.plot_cores([results[8][p][:2] for p in POLICIES[:3]], plot,
                          f"{name}: per-core load on 8 cores")
        print(f"  per-core load: {plot}")
    if trace:
        n_ev = report.write_trace(trace, t8, works, plan, timing)
        print(f"  trace: {trace} ({n_ev} events, a track group per core)")
    return results


def compile_speed(rounds: int) -> None:
    from ember_xla.call_specs import cluster_spec, ember_calls
    from ember_xla.dae_target.passes.levels import lower_cluster, lower_final
    from ember_xla.placement.dae.variants import VARIANTS

    model, _ = mlperf_stage(8, 20_000, 1.05)
    specs = [cluster_spec(c) for c in ember_calls(rewrite_for_placement(model.module).module)]
    times: dict[str, list[tuple[float, float]]] = {"lower_cluster": [], "lower_final+cache": []}
    for _ in range(rounds):
        for name in times:
            c0, w0 = time.process_time(), time.perf_counter()
            cache: dict[Any, Any] = {}
            for spec in specs:
                for pipe in VARIANTS.values():
                    if name == "lower_cluster":
                        lower_cluster(spec, pipe)
                    else:
                        lower_final(spec, pipe, cache=cache)
            times[name].append((time.process_time() - c0, time.perf_counter() - w0))
    print(f"compile {len(specs)} clusters x {len(VARIANTS)} variants, {rounds} rounds")
    for name, v in times.items():
        print(f"  {name:18s} cpu s {[round(c, 2) for c, _ in v]}  wall s "
              f"{[round(w, 2) for _, w in v]}")
    best = {k: min(c for c, _ in v) for k, v in times.items()}
    print(f"  ratio (best CPU): {best['lower_cluster'] / best['lower_final+cache']:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--cap", type=int, default=20_000, help="rows per table at most")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--trace", default=None)
    ap.add_argument("--target", default="tmu8", help="a multi-core DAE target")
    ap.add_argument("--example_batch", type=int, default=1024)
    ap.add_argument("--train", default="sgd,adagrad,rowwise_adagrad",
                    help="training steps to run (their backward kinds placed too); '' for none")
    ap.add_argument("--train_batch", type=int, default=256)
    ap.add_argument("--train_cap", type=int, default=20_000, help="rows per trained table")
    ap.add_argument("--compile", action="store_true", help="time the setup's compile only")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.compile:
        compile_speed(a.rounds)
        return
    base = load_target(a.target)
    print(f"target {base.name} ({base.source}); batch {a.batch}; rows capped at {a.cap:,}")
    for alpha in (0.0, 1.05):
        dist = "uniform" if not alpha else f"zipf{alpha}"
        m, args = mlperf_stage(a.batch, a.cap, alpha)
        run_model(f"MLPerf DLRM stage, {dist} ids", m, args, base,
                  a.plot.replace(".png", f"_{dist}.png") if a.plot else None,
                  a.trace.replace(".json", f"_{dist}.json") if a.trace else None)
    m, args = example(a.example_batch)
    run_model("built-in DLRM-style example", m, args, base, None, None)
    for opt in a.train.split(",") if a.train else ():
        m, args = training(a.train_batch, a.train_cap, opt)
        run_model(f"DLRM training step ({opt}, six tables), backward cut by table rows", m,
                  args, base, None, None)


if __name__ == "__main__":
    main()
