"""DLRM-like training step: XLA:CPU vs the ember rewrite vs FBGEMM TBE vs torch EmbeddingBag.

A benchmark, not a test. The step is the embedding half of MLPerf DLRM-DCNv2 trained with a
linear read-out: 26 tables (MLPerf rows capped at ``--rows_cap``), D=128, f32, MLPerf pooling
factors, Zipf-distributed ids (duplicates within and across bags, as in click logs), bags
pooled by ``jax.ops.segment_sum(jnp.take(...))``, concatenated, times a [26 D, 1] read-out,
squared error; ``jax.value_and_grad`` and the optimizer's update of every table (and the
read-out):
  sgd                t <- t - lr * g
  rowwise_adagrad    a <- a + mean(g * g, axis=1);  t <- t - lr * g / (sqrt(a) + eps)
(FBGEMM's EXACT_SGD and EXACT_ROWWISE_ADAGRAD).

Variants, run side by side in one process, interleaved in blocks (3 runs in a row, the first
untimed; the block order rotates every repetition), medians of the timed runs; each JAX variant
runs as a training loop (a step's new tables, slots and read-out are its next step's inputs):
  xla           jax.jit(step) on XLA:CPU: new tables written every step;
  xla_donated   jax.jit(step, donate_argnums=(tables, slots)): XLA may update in place;
  ember         the same step exported as HLO, rewritten by ember_xla.rewrites (defaults),
                compiled on XLA:CPU; the clusters it finds are printed (forward lookups,
                backward gradients, the optimizer fused into a gradient where it is);
  ember_donated the donated export, rewritten (input_output_alias kept);
  tbe           FBGEMM SplitTableBatchedEmbeddingBagsCodegen on the CPU (fbgemm-gpu-cpu 1.8.0)
                with the same optimizer fused into its backward, tables updated in place; the
                read-out in torch;
  torch         torch.nn.EmbeddingBag(mode='sum', sparse=True) per table + torch.optim.SGD
                (sgd) or torch.optim.Adagrad with sparse gradients (element-wise Adagrad: not
                the same algorithm as rowwise; labelled so).
The copy floor: without donation every variant must write whole new tables (and slots), so
a numpy copy of the same bytes into preallocated arrays (``copy`` on one thread, ``copy_mt``
cut between all cores; the faster of the two, timed interleaved with the variants) gives the
machine's memory bandwidth under the same load and the floor of a step
that is not donated; each variant's ratio to it is printed, and to ``xla_copy``: XLA:CPU
writing ``-t`` of every table into its output buffers (what any non-donated XLA step
pays for its new tables, allocation and first touch of the pages included).
Result buffers: ember_xla's result-buffer cache (docs/CUSTOM_CALL.md: a step's large results
reuse the blocks earlier results freed instead of fresh pages) is on for the ember variants,
as ember_xla gives it by default, and off for XLA's own (``xla``, ``xla_donated``,
``xla_copy``: glibc's allocation, as a plain JAX process has it), switched before each block's
untimed first call; what it did is printed. ``EMBER_XLA_BUFFER_CACHE_MIB=0`` turns it off for
every variant.
Table pages: before timing, each ember variant runs twice more and waits until the kernels
have moved its large tables onto 2 MiB pages (their one-time background collapse, table_pages
in docs/CUSTOM_CALL.md: a training run's steady state), so the timed steps, page faults and
system CPU are the step's own and not the collapse's; TBE's, torch's and XLA's tables stay on
the pages their allocators gave them.
Peak RSS per variant (``--rss``): each variant alone in a fresh process, built (its check
outputs dropped) and then run 3 times; its peak resident set while running (sampled every ms)
minus the resident set once the shared numpy data exist and the frameworks are imported: the
variant's own copy of the tables and state, its compiled code and every step's buffers count.
Page faults and system CPU time per step (getrusage over 3 more steps of each variant): what
the first writes into memory mapped anew for a step cost (fresh result tables without
donation; XLA:CPU's per-execution temporary buffer, mapped anew when it exceeds the
allocator's mmap threshold).

Breakdown: after timing, the donated steps (XLA's and ours) run 3 more times under
``jax.profiler`` and the time of XLA:CPU's thunks is printed per part of the step (forward
ember calls, fused updates, gradient kernels, XLA's own ops, output allocation:
train_profile.py). When all variants would not fit in the available memory together (1M
rows: 3.4 GiB of tables, some 16 copies), or with ``--one_at_a_time``, each variant is built,
checked, timed, profiled and freed in turn, its peak RSS sampled in this process
(train_sequential.py). Modules: train_variants.py (data, step, JAX variants),
train_torch.py (TBE, torch), train_memory.py (RSS, copy floors).

    python benchmarks/bench_train.py --rows_cap 100000 --reps 5 --rss  # what fits a shared box
    python benchmarks/bench_train.py                               # full size: 1M rows cap
    python benchmarks/bench_train.py --tables 4 --rows_cap 20000 --batch 256 --reps 3  # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench_embedding import BLOCK
from stage_model import POOLING
from train_memory import (
    allocator,
    copy_bytes,
    copy_floor,
    faults,
    peak_rss,
    peak_rss_child,
    use_allocators,
    xla_new_tables,
)
from train_profile import breakdown_line, profile
from train_sequential import available_bytes, estimate_bytes, run_sequential
from train_torch import check_torch
from train_variants import VARIANTS, make_data, make_variant


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows_cap", type=int, default=1_000_000, help="rows per table at most")
    p.add_argument("--tables", type=int, default=26, help="the first k of the 26 tables")
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (blocks)")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the ids")
    p.add_argument("--optimizers", default="sgd,rowwise_adagrad")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of " + ", ".join(VARIANTS),
    )
    p.add_argument(
        "--rss",
        action="store_true",
        help="also measure each variant's peak RSS, each in a fresh process",
    )
    p.add_argument(
        "--one_at_a_time",
        action="store_true",
        help="build, time and free one variant after the other (automatic when "
        "all of them would not fit in the available memory); peak RSS then "
        "measured in this process",
    )
    p.add_argument("--rss_of", choices=VARIANTS, help=argparse.SUPPRESS)  # the child's job
    args = p.parse_args(argv)
    if not 1 <= args.tables <= 26 or args.rows_cap < 1 or args.batch < 1 or args.reps < 1:
        p.error("--tables must be in [1, 26]; --rows_cap, --batch and --reps positive")
    bad = set(args.optimizers.split(",")) - {"sgd", "rowwise_adagrad"}
    if bad:
        p.error(f"unknown optimizer(s) {sorted(bad)}: choose from sgd, rowwise_adagrad")
    chosen = args.variants.split(",")
    if set(chosen) - set(VARIANTS) or not {"xla", "tbe"} <= set(chosen):
        p.error(
            f"--variants: a subset of {', '.join(VARIANTS)} holding xla and tbe (the "
            "ratios' references)"
        )
    args.variants = [v for v in VARIANTS if v in chosen]
    args.failed = False
    return args


def time_variants(variants: dict, reps: int) -> tuple[dict, dict]:
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for rep in range(reps):
        for k in order[rep % len(order) :] + order[: rep % len(order)]:
            allocator(variants[k])
            variants[k]()
            for _ in range(BLOCK - 1):
                t = time.perf_counter()
                variants[k]()
                times[k].append(time.perf_counter() - t)
    return (
        {k: statistics.median(v) for k, v in times.items()},
        {k: min(v) for k, v in times.items()},
    )


def interleaved(args, argv, data, optimizer: str, rows):
    """Every variant alive at once, timed interleaved in blocks: (medians, minimums, labels,
    peak RSS GiB per variant (each in a fresh process, --rss), profiles, load average,
    (page faults, system CPU ms) per step of each variant)."""
    runs, names, outs = {}, {}, {}
    for name in args.variants:
        runs[name], names[name], outs[name] = make_variant(args, data, optimizer, name)
    for line in check(outs):
        print(line)
        if not line.endswith("True"):
            args.failed = True
    for name in {"tbe", "torch"} & set(args.variants):
        print(
            check_torch(
                name, runs[name], outs["xla"][: len(rows)], name == "tbe" or optimizer == "sgd"
            )
        )
    runs["copy"], _ = copy_floor(data, optimizer)
    runs["copy_mt"], _ = copy_floor(data, optimizer, os.cpu_count() or 1)
    runs["xla_copy"] = xla_new_tables(data, optimizer)
    med, mins = time_variants(runs, args.reps)
    load = os.getloadavg()[0]
    prof = {}
    for k in ("xla_donated", "ember_donated"):
        if k in runs:
            allocator(runs[k])
            prof[k] = profile(runs[k])
    flt = {k: faults(runs[k]) for k in args.variants}
    del runs, outs
    peaks = {k: peak_rss(argv, optimizer, k) for k in args.variants} if args.rss else {}
    return med, mins, names, peaks, prof, load, flt


def check(outs: dict) -> list[str]:
    """The rewritten steps against XLA's, bit for bit (loss, tables, slots, read-out)."""
    lines = []
    for name in {"ember", "ember_donated"} & set(outs):
        same = len(outs[name]) == len(outs["xla"]) and all(
            a.tobytes() == b.tobytes() for a, b in zip(outs[name], outs["xla"], strict=True)
        )
        lines.append(f"check: {name} == XLA bit for bit (loss, tables, slots, read-out): {same}")
    return lines


def buffer_cache_line() -> str:
    """What ember_xla's result-buffer cache did in this process (docs/CUSTOM_CALL.md)."""
    from ember_xla.native import buffer_cache

    s = buffer_cache.stats()
    state = "off (EMBER_XLA_BUFFER_CACHE_MIB=0)" if not s.reused + s.mapped else "on"
    return (
        f"result buffers: ember_xla's buffer cache {state} for the ember variants (off for "
        f"XLA's): {s.reused} large results reused a freed block, {s.mapped} mapped anew"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import jax
    import torch

    jax.config.update("jax_platforms", "cpu")
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    use_allocators()
    data = make_data(args)
    if args.rss_of:
        peak_rss_child(args, data, args.optimizers, args.rss_of)
        return 0
    rows = data[0]
    gib = sum(rows) * args.dim * 4 / 2**30
    print(
        f"DLRM-like training step: {args.tables} tables, D={args.dim}, B={args.batch}, f32, "
        f"{sum(POOLING[: args.tables])} lookups/sample, Zipf({args.zipf}) ids, rows capped at "
        f"{args.rows_cap:,} ({gib:.2f} GiB of tables); setup {time.perf_counter() - t0:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    ok = True
    tbe_med: dict[str, float] = {}
    ours: dict[str, float] = {}
    for optimizer in args.optimizers.split(","):
        need, have = estimate_bytes(data, optimizer), available_bytes()
        copied = copy_bytes(data, optimizer)
        one = args.one_at_a_time or need > 0.8 * have
        how = "timed alone" if one else "interleaved"
        if one:
            print(
                f"\n{optimizer}: one variant at a time (all at once would need about "
                f"{need / 2**30:.1f} GiB, {have / 2**30:.1f} GiB available)"
            )
            med, mins, names, peaks, prof, lines, loads, flt = run_sequential(args, data, optimizer)
            for line in lines:
                print(line)
                ok = ok and line.endswith("True")
            print(
                "check: TBE and torch against XLA: not run one variant at a time (it would "
                "keep XLA's tables alive); see an interleaved run at a smaller --rows_cap"
            )
            print(
                "load average after each variant: "
                + ", ".join(f"{k} {v:.1f}" for k, v in loads.items())
            )
            load = max(loads.values())
        else:
            med, mins, names, peaks, prof, load, flt = interleaved(
                args, argv, data, optimizer, rows
            )
            ok = ok and not args.failed
        slots = 0 if optimizer == "sgd" else sum(rows) * 4 / 2**30
        print(
            f"\n{optimizer}: {args.reps} repetitions of blocks of {BLOCK} (first untimed, "
            f"order rotated); load average {load:.2f}; tables {gib:.2f} GiB + optimizer "
            f"state {slots:.3f} GiB"
        )
        print(
            "| variant | median ms | min ms | vs XLA:CPU | vs XLA:CPU donated | vs TBE | "
            "peak RSS GiB | page faults / step | system CPU ms / step |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        ref_donated = med.get("xla_donated", float("nan"))
        for k in args.variants:
            peak = peaks.get(k)
            print(
                f"| {names[k]} | {med[k] * 1e3:.1f} | {mins[k] * 1e3:.1f} | "
                f"{med['xla'] / med[k]:.2f}x | {ref_donated / med[k]:.2f}x | "
                f"{med['tbe'] / med[k]:.2f}x | {'-' if peak is None else f'{peak:.2f}'} | "
                f"{flt[k][0]:.0f} | {flt[k][1]:.1f} |"
            )
        tbe_med[optimizer] = med["tbe"]
        if "ember_donated" in med:
            ours[optimizer] = med["ember_donated"]
            if "torch" in med:
                print(f"ember donated vs {names['torch']}: {med['torch'] / ours[optimizer]:.2f}x")
        if prof:
            print(
                "\nbreakdown (jax.profiler: XLA:CPU's thunk events summed per part; concurrent "
                "thunks each counted whole):"
            )
            for k, (wall, parts) in prof.items():
                print(breakdown_line(names[k], wall, parts))
        cores = os.cpu_count() or 1
        floor = min(med["copy"], med["copy_mt"])
        print(
            f"\ncopy floor (numpy copy of the {copied / 2**30:.2f} GiB of tables and slots, "
            f"{how}; the faster of one thread and {cores}): one thread median "
            f"{med['copy'] * 1e3:.1f} ms (min {mins['copy'] * 1e3:.1f}), {cores} threads median "
            f"{med['copy_mt'] * 1e3:.1f} ms (min {mins['copy_mt'] * 1e3:.1f}); bandwidth "
            f"{2 * copied / floor / 1e9:.1f} GB/s (read + write, median)"
        )
        print(
            f"XLA:CPU writing new tables of the same shapes (-t, into its output buffers, "
            f"{how}): median {med['xla_copy'] * 1e3:.1f} ms, min "
            f"{mins['xla_copy'] * 1e3:.1f} ms"
        )
        print(buffer_cache_line())
        for k in args.variants:
            if k in ("xla", "ember"):
                print(
                    f"  {names[k]}: {med[k] / floor:.2f}x the copy floor (acceptance: <= "
                    f"1.25x), {med[k] / med['xla_copy']:.2f}x XLA's new-table floor"
                )
    for opt, ms in ours.items():
        for ref, tms in tbe_med.items():
            print(f"ember donated {opt} vs FBGEMM TBE {ref}: {tms / ms:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
