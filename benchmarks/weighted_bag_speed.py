"""Weighted padded bags (``(t[ids] * w[..., None]).sum(1)``) at the sizes XLA:CPU gives to
YNNPACK, now rewritten in XLA's own order (docs/RELIABILITY.md): XLA:CPU against the rewritten
module, alternating in one process (sweep.compare), medians. Each shape twice: every cluster
rewritten (``cost_model=False``: the kernel's own speed) and with the cost model's decision.

    python benchmarks/weighted_bag_speed.py [--reps 15]     # numbers in docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import compare  # noqa: E402

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
SHAPES = [(20_000, 32, 256, 20), (20_000, 64, 256, 20), (20_000, 128, 64, 100),
          (20_000, 32, 2048, 10), (20_000, 16, 256, 20)]  # N, D, B, P


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print("dtype | N,D,B,P | cost model | XLA ms | ember ms | ratio | rewritten | bit-equal")
    for dname, dt in DTYPES.items():
        for n, d, b, p in SHAPES:
            rng = np.random.default_rng(0)
            inputs = [rng.standard_normal((n, d)).astype(dt),
                      rng.integers(0, n, (b, p)).astype(np.int32),
                      rng.uniform(0.5, 1.0, (b, p)).astype(dt)]
            for cm in (False, True):
                r = compare(lambda t, i, w: (t[i] * w[..., None]).sum(1), inputs, args.reps,
                            cost_model=cm)
                print(f"{dname} | {n},{d},{b},{p} | {'on' if cm else 'off'} | "
                      f"{r['xla_ms']:.3f} | {r['ember_ms']:.3f} | {r['measured']:.2f}x | "
                      f"{r['rewritten']} | {'yes' if r['same'] else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
