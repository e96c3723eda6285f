"""What each Ember level costs a decoupled machine, in the DLC interpreter's exact counts, next
to the hand-written DLC program, and how fast the DLC reference interpreter runs.

A benchmark, not a test. The bag is the hand-built O0 function of
``tests/dae_target/slc_examples.py`` compiled through -O0..-O3 (``passes/levels.py``, all
ending in ``decouple``) and the hand-written program of ``dae_target/handwritten.py``; every
output must equal O0's SLC output bit for bit. Counts are exact and deterministic (seeded
inputs); times are medians of ``--reps`` runs and only indicative on a shared machine.

    python benchmarks/bench_dlc.py                  # 32 bags, D=64
    python benchmarks/bench_dlc.py --bags 8 --dim 16 --reps 1
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

KEYS = ("dlc.tokens", "dlc.queue_entries", "dlc.queue_bytes", "stream_elements",
        "stream_bytes", "dlc.tu_iterations")


def main() -> None:
    import ember_xla.dae_target.passes  # noqa: F401
    from ember_xla.dae_target.handwritten import sum_bag_dlc
    from ember_xla.dae_target.interp.dlc import counts
    from ember_xla.dae_target.passes.levels import LEVELS
    from ember_xla.ir.passes import parse_pipeline

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bags", type=int, default=32)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(0, 35, size=args.bags)]
    inputs = E.bag_inputs(rng, lengths, args.rows, args.dim)
    want, _ = E.run_bag(E.embedding_bag(), inputs)
    programs = []
    for level in (0, 1, 2, 3):
        m = E.embedding_bag()
        for p in parse_pipeline(LEVELS[level]):
            p.apply(m)
        programs.append((f"-O{level}", m))
    programs.append(("hand-written", sum_bag_dlc(vl=8)))
    print(f"sum bag: {args.bags} bags, {sum(lengths)} lookups, D={args.dim}, VL=8")
    print(f"{'program':14s}" + "".join(f"{k.removeprefix('dlc.'):>16s}" for k in KEYS)
          + f"{'median s':>10s}{'elem/s':>10s}")
    for name, m in programs:
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            got, c = E.run_bag(m, inputs)
            times.append(time.perf_counter() - t0)
            assert np.array_equal(got, want), name
        c = counts(c)
        t = statistics.median(times)
        print(f"{name:14s}" + "".join(f"{c[k]:16d}" for k in KEYS)
              + f"{t:10.3f}{c['stream_elements'] / t:10.0f}")


if __name__ == "__main__":
    main()
