"""DLRM-like embedding stage: XLA:CPU vs the ember rewrite vs torch.nn.EmbeddingBag.

A benchmark, not a test. It builds the embedding stage of MLPerf DLRM-DCNv2 (Criteo 1TB):
26 tables, D=128, f32, the MLPerf multi-hot pooling factors (214 lookups per sample), uniform
random ids, rows per table from the MLPerf list capped (default 1M rows, so the tables fit this
machine: ~3.6 GiB). Each table's bags are a ``jax.ops.segment_sum`` over the table's flat
lookups (sample-major, so segment ids are sorted), and the 26 pooled [B, D] results are
concatenated, exactly what a JAX DLRM does.

Variants, run side by side in one process, interleaved in blocks (3 runs of a variant in a
row, the first untimed; the block order rotates every repetition), medians over the timed runs:
  xla      the JAX function (jnp.take + jax.ops.segment_sum per table, concatenated) under
           jax.jit on XLA:CPU;
  ember    what a user gets: the same function exported as an HloModuleProto, rewritten by
           ``ember-xla rewrite model.pb --out D`` with no flags (a separate process; cost
           model on, table batching on: one ``ember.grouped_segment_reduce_concat`` call for
           all 26 tables that writes the concatenated [B, 26 * D] result in place), and
           ``D/rewritten.pb`` run on XLA:CPU (falls back to calling the ember targets directly
           through jax.ffi.ffi_call, labelled so, when ember_xla is missing);
  separate the same with ``--nogroup_tables``: 26 ``ember.segment_reduce`` calls and XLA's
           concatenate;
  torch    torch.nn.functional.embedding_bag(mode='sum') per table (FBGEMM CPU kernels; what
           nn.EmbeddingBag runs), on the very same table memory, 2 threads;
  gather   the machine's random-row-gather bandwidth: a C++ loop summing random rows of a
           1M x D table (the library's EmberGatherProbe, prefetching), 1 and 2 threads.

Table pages: the kernels put every table of >= 64 MiB that a second call reads onto 2 MiB huge
pages in place (``EMBER_XLA_TABLE_PAGES``, docs/CUSTOM_CALL.md; a one-time background copy). The
benchmark waits for that after the warm-up and prints what was done; since all variants read the
same table memory, XLA, torch and the probe then run on the same huge pages too.
``EMBER_XLA_TABLE_PAGES=0`` gives the small-page numbers.

Bytes moved per stage = lookups * D * 4 + index bytes (ids + segment ids / offsets), the
TorchRec-style traffic model; "% of gather" is that over the best measured gather bandwidth.
Small tables are cache resident, so a variant can exceed 100% of the random-gather figure.

    python benchmarks/bench_embedding.py            # full size (needs ~9 GiB of memory)
    python benchmarks/bench_embedding.py --quick    # small smoke run
    python benchmarks/bench_embedding.py --sweep --reps 15   # every batch size, >= 1.0x rows
    python benchmarks/bench_embedding.py --processes 3   # 3 process runs, medians of the ratios
    python benchmarks/bench_embedding.py --padded   # the stage as padded [B, P] bags (Keras, flax)
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python benchmarks/bench_embedding.py
        # malloc'd memory (XLA's buffers) madvised for transparent huge pages: far fewer page
        # faults on the per-execution output/temp buffers (see docs/BENCHMARKS.md)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from stage_model import POOLING, make_data, padded_stage_fn, stage_fn
from stage_variants import (
    ember_variant,
    gather_probe,
    torch_variant,
    wait_for_table_pages,
    xla_variant,
)

BLOCK = 3  # runs per variant per repetition; the first one settles and is not timed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Prints a table of medians and the ratios ember/XLA, ember/torch, ember/gather.",
    )
    p.add_argument("--quick", action="store_true", help="small smoke run (B=256, 20k rows, 5 reps)")
    p.add_argument("--batch", type=int, default=None, help="samples per batch B (default 2048)")
    p.add_argument("--dim", type=int, default=128, help="embedding dimension D (default 128)")
    p.add_argument(
        "--max-rows", type=int, default=None, help="cap on rows per table (default 1000000)"
    )
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (default 15)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-torch", action="store_true", help="skip the torch column")
    p.add_argument("--processes", type=int, default=0,
                   help="run the benchmark this many times, each in a fresh process (one after "
                        "the other), and print the median of each ratio over the runs")
    p.add_argument("--padded", action="store_true",
                   help="the stage as Keras / flax write it: padded [B, P] id arrays, "
                        "jnp.take(t, ids).sum(1) per table (no segment ids)")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one-line result
    p.add_argument("--sweep", action="store_true",
                   help="instead: the batch sweep (batch 1/16/256/2048; single tables, the "
                        "8-table model, the 26-table stage), rewritten vs XLA:CPU per row "
                        "(benchmarks/sweep.py)")
    args = p.parse_args(argv)
    args.batch = args.batch or (256 if args.quick else 2048)
    args.max_rows = args.max_rows or (20000 if args.quick else 1_000_000)
    args.reps = args.reps or (5 if args.quick else 15)
    return args


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.processes:
        return run_processes(args.processes, list(sys.argv[1:] if argv is None else argv))
    # torch's OpenMP threads otherwise spin-wait after every embedding_bag and steal the CPU
    # from whatever runs next (on 2 cores this made torch itself 40x slower, interleaved with
    # XLA's threads): sleep when idle, like the other variants' threads do.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import jax

    jax.config.update("jax_platforms", "cpu")
    if args.sweep:
        from sweep import run_sweep

        return 1 if run_sweep(args.reps, args.max_rows) else 0
    t0 = time.perf_counter()
    rows, tables, idx, seg, offsets = make_data(args)
    b, d = args.batch, args.dim
    lookups = b * sum(POOLING)
    # rows + ids + segment ids (s32; padded bags have none)
    bytes_moved = lookups * d * 4 + lookups * 4 * (1 if args.padded else 2)
    print(
        f"DLRM-DCNv2 embedding stage: 26 tables, D={d}, B={b}, f32, {sum(POOLING)} lookups/sample "
        f"({lookups} per batch), rows per table = MLPerf list capped at {args.max_rows:,} "
        f"({sum(rows) * d * 4 / 2**30:.2f} GiB of tables); uniform random ids; "
        f"setup {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}; "
        f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}"
    )
    if args.padded:
        stage = padded_stage_fn()
        inputs = list(tables) + [i.reshape(b, p) for i, p in zip(idx, POOLING, strict=True)]
    else:
        stage = stage_fn(b)
        inputs = list(tables) + idx + seg
    variants = {}
    names = {}
    variants["xla"] = xla_variant(stage, inputs)
    names["xla"] = "XLA:CPU jnp.take + " + ("sum(1), padded" if args.padded else "segment_sum") \
        + " (jit)"
    run, names["ember"], summary = ember_variant(stage, inputs)
    variants["ember"] = run
    if summary:
        print(f"rewrite: {summary}")
    run, names["separate"], summary = ember_variant(stage, inputs, group=False)
    variants["separate"] = run
    if summary:
        print(f"rewrite without table batching: {summary}")
    if not args.no_torch:
        run, label = torch_variant(tables, idx, offsets)
        if run is None:
            print(f"note: {label}")
        else:
            variants["torch"], names["torch"] = run, label
    probes, probe_rows = gather_probe(tables, d, lookups, args.seed)
    for threads, run in probes.items():
        variants[f"gather{threads}"] = run
        names[f"gather{threads}"] = (
            f"random row gather, {threads} thread{'s' if threads > 1 else ''} "
            f"({probe_rows:,} x {d} table)"
        )

    # Results: XLA vs ember bit for bit; torch allclose.
    want = np.asarray(variants["xla"]())
    got = np.asarray(variants["ember"]())
    same = want.shape == got.shape and np.array_equal(want.view(np.uint32), got.view(np.uint32))
    print(f"check: ember == XLA bit for bit: {same}")
    g = np.asarray(variants["separate"]())
    g_same = g.shape == want.shape and np.array_equal(want.view(np.uint32), g.view(np.uint32))
    same = same and g_same
    print(f"check: ember (separate calls) == XLA bit for bit: {g_same}")
    if "torch" in variants:
        tv = variants["torch"]().numpy()
        close = np.allclose(tv, want, rtol=1e-5, atol=1e-5)
        print(f"check: torch allclose to XLA: {close} (max |diff| {np.abs(tv - want).max():.2e})")
    for run in variants.values():  # warm up (ember's second call queues its tables' collapse)
        run()
    print(f"table pages: {wait_for_table_pages()}")

    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for rep in range(args.reps):
        # Interleaved in short blocks: each variant runs BLOCK times in a row and the first run
        # of a block is not timed. Variants in one process interfere through the allocator and
        # XLA's threads: whichever ran right after XLA (58k page faults per run) took ~10 ms
        # longer, and another's freed buffers decide who writes into fresh pages (torch's
        # 27 MB cat: 6,400 faults in some orders, 0 in others). The untimed first run absorbs
        # that hand-over; the timed ones are the steady state of a model called repeatedly.
        # The block order rotates every repetition, so slow drift of the machine hits all alike.
        for k in order[rep % len(order):] + order[: rep % len(order)]:
            variants[k]()
            for _ in range(BLOCK - 1):
                t = time.perf_counter()
                variants[k]()
                times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    gather_bw = max(lookups * d * 4 / med[k] for k in med if k.startswith("gather"))

    print(f"\n{args.reps} repetitions of blocks of {BLOCK} runs per variant (first run of a "
          f"block untimed, block order rotated); load average {os.getloadavg()[0]:.2f}")
    print("| variant | median ms | min ms | GB/s | % of gather |")
    print("|---|---:|---:|---:|---:|")
    for k in variants:
        is_probe = k.startswith("gather")
        moved = lookups * d * 4 if is_probe else bytes_moved
        bw = moved / med[k] / 1e9
        print(
            f"| {names[k]} | {med[k] * 1e3:.2f} | {min(times[k]) * 1e3:.2f} | {bw:.2f} | "
            f"{100 * bw * 1e9 / gather_bw:.0f}% |"
        )
    print()
    print(f"ember vs XLA:CPU: {med['xla'] / med['ember']:.2f}x faster")
    if "torch" in med:
        print(f"ember vs torch:   {med['torch'] / med['ember']:.2f}x faster")
    print(
        f"ember without table batching (26 calls): {med['xla'] / med['separate']:.2f}x XLA:CPU"
        + (f", {med['torch'] / med['separate']:.2f}x torch" if "torch" in med else "")
        + f", {100 * bytes_moved / med['separate'] / gather_bw:.0f}% of gather"
    )
    print(
        f"ember vs gather:  {100 * bytes_moved / med['ember'] / gather_bw:.0f}% of the measured "
        f"random-row-gather bandwidth ({gather_bw / 1e9:.2f} GB/s)"
    )
    if args.json:
        print("RESULT " + json.dumps({
            "same": same, "load": os.getloadavg()[0], "gather_GBps": gather_bw / 1e9,
            "ms": {k: v * 1e3 for k, v in med.items()},
            "ember_vs_xla": med["xla"] / med["ember"],
            "ember_vs_torch": med["torch"] / med["ember"] if "torch" in med else None,
            "separate_vs_xla": med["xla"] / med["separate"],
            "ember_pct_gather": 100 * bytes_moved / med["ember"] / gather_bw}))
    return 0 if same else 1


def run_processes(n: int, argv: list[str]) -> int:
    """n runs of this benchmark, each in a fresh process; medians of the ratios over the runs."""
    import subprocess

    child, skip = [], False
    for a in argv:  # drop --processes N / --processes=N
        if skip or a.startswith("--processes"):
            skip = a == "--processes" and not skip
            continue
        child.append(a)
    results = []
    for i in range(n):
        out = subprocess.run([sys.executable, __file__, *child, "--json"], capture_output=True,
                             text=True, check=False)
        print(f"--- process run {i + 1}/{n} (exit {out.returncode})")
        lines = out.stdout.splitlines()
        print("\n".join(line for line in lines if not line.startswith("RESULT ")))
        if out.returncode:
            print(out.stderr[-2000:])
        results += [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
    if not results:
        return 1
    med = statistics.median
    print(f"\nmedians over {len(results)} process runs:")
    for key in ("ember_vs_xla", "ember_vs_torch", "separate_vs_xla", "ember_pct_gather",
                "gather_GBps"):
        vals = [r[key] for r in results if r[key] is not None]
        if vals:
            print(f"  {key}: {med(vals):.2f} (runs: {', '.join(f'{v:.2f}' for v in vals)})")
    print(f"  every run bit-exact with XLA: {all(r['same'] for r in results)}")
    return 0 if all(r["same"] for r in results) and len(results) == n else 1


if __name__ == "__main__":
    sys.exit(main())
