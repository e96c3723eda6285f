"""What the SLC/SLCV passes save, in the interpreters' own counts, and how fast the SLC and
SLCV reference interpreters run (elements loaded per second), on a sum embedding bag.

A benchmark, not a test. The bag is the hand-built O0 function of
``tests/dae_target/slc_examples.py`` (Ember's eb_slc_O0 shape: bag loop, lookup loop with a
clamped id stream, row loop with one callback per element); each pipeline runs on a fresh copy
and its outputs must equal O0's bit for bit. Counts are exact and deterministic (seeded
inputs); interpreter times are medians of ``--reps`` runs and only indicative on a shared
machine.

    python benchmarks/bench_slcv_passes.py                  # 32 bags, D=64, VL=8
    python benchmarks/bench_slcv_passes.py --bags 8 --dim 16 --reps 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "dae_target"))
import slc_examples as E  # noqa: E402

PIPELINES = [
    ("O0 (lowered SLC)", ""),
    ("vectorize", "vectorize{vl=%d}"),
    ("+ bufferize", "vectorize{vl=%d},bufferize"),
    ("+ simplify-mem", "vectorize{vl=%d},bufferize,simplify-mem"),
    ("dedup + all", "dedup,vectorize{vl=%d},bufferize,simplify-mem,hoist"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bags", type=int, default=32)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--vl", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(0, 33, size=args.bags)]
    for rows in (1000, 50):
        x = E.bag_inputs(rng, lengths, rows, args.dim)
        print(f"table rows={rows} lookups={len(x[1])} distinct ids={len(np.unique(x[1]))} "
              f"D={args.dim} VL={args.vl}")
        print(f"  {'pipeline':18s} {'callbacks':>9s} {'elements':>9s} {'vec acc':>8s} "
              f"{'contig':>7s} {'buf elems':>9s} {'core loads':>10s} {'elem/s':>9s}")
        ref = None
        for label, pipe in PIPELINES:
            m = E.embedding_bag("sum", clamp=True)
            if pipe:
                E.apply_printed(m, pipe % args.vl)
            times = []
            for _ in range(args.reps):
                t = time.perf_counter()
                out, c = E.run_bag(m, x)
                times.append(time.perf_counter() - t)
            ref = out if ref is None else ref
            if not np.array_equal(out, ref):
                raise SystemExit(f"{label}: outputs differ from O0")
            elements = c["slc.elements"] + c["slcv.elements"]
            rate = elements / statistics.median(times)
            print(f"  {label:18s} {c['slc.callbacks']:9d} {elements:9d} {c['slcv.vectors']:8d} "
                  f"{c['slcv.contiguous']:7d} {c['slcv.buffer_elements']:9d} "
                  f"{c['core.loads']:10d} {rate:9.0f}")


if __name__ == "__main__":
    main()
