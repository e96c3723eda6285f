"""Padded max/min bags (``t[ids].max(1)``, ``.min(1)``) in XLA:CPU's semantics
(native/padded_minmax.h): XLA:CPU against the rewritten module, alternating in one process
(sweep.compare), medians; each shape with every cluster rewritten (``cost_model=False``: the
kernel's own speed) and with the cost model. Shapes on both sides of 4096 elements (XLA's own
loop below, YNNPACK from there on).

    python benchmarks/padded_minmax_speed.py [--reps 15]     # numbers in docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import compare  # noqa: E402

# N, D, B, P: XLA's own loop (< 4096 elements), then YNNPACK sizes up to 2048 bags of 50 rows
SHAPES = [(1_000, 16, 4, 6), (1_000, 16, 8, 16), (1_000, 32, 2, 50), (20_000, 16, 64, 10),
          (20_000, 32, 256, 20), (20_000, 64, 256, 20), (20_000, 128, 64, 100),
          (100_000, 64, 2048, 50), (20_000, 17, 512, 8)]
KINDS = {"max": lambda t, i: t[i].max(1), "min": lambda t, i: t[i].min(1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--kinds", default="max,min")
    args = ap.parse_args()
    print("kind | N,D,B,P | elements | cost model | XLA ms | ember ms | ratio | rewritten | "
          "bit-equal")
    for kind in args.kinds.split(","):
        for n, d, b, p in SHAPES:
            rng = np.random.default_rng(0)
            inputs = [rng.standard_normal((n, d)).astype(np.float32),
                      rng.integers(0, n, (b, p)).astype(np.int32)]
            for cm in (False, True):
                r = compare(KINDS[kind], inputs, args.reps, cost_model=cm)
                print(f"{kind} | {n},{d},{b},{p} | {b * p * d} | {'on' if cm else 'off'} | "
                      f"{r['xla_ms']:.4f} | {r['ember_ms']:.4f} | {r['measured']:.2f}x | "
                      f"{r['rewritten']} | {'yes' if r['same'] else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
