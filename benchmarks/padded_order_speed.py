"""Padded bags in the orders the rewrite now reproduces (docs/RELIABILITY.md, "The order of a
padded bag's sum"): weighted bags (``(t[ids] * w[..., None]).sum(1)``) at the sizes XLA:CPU
gives to YNNPACK (``sequential_fma`` for f32 products, ``blocked`` for f16 ones), rows scaled
by one number (``(jnp.take(t, ids) * sqrt(D)).sum(1)``: YNNPACK's ``blocked`` sum of the rounded
f32 products) and small unweighted bags of 25-32 rows (``vector8``) and more than 32
(``tree32``). XLA:CPU against the
rewritten module, alternating in one process (sweep.compare), medians; each shape twice: every
cluster rewritten (``cost_model=False``: the kernel's own speed) and with the cost model.

    python benchmarks/padded_order_speed.py [--reps 15]     # numbers in docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import compare  # noqa: E402

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
WEIGHTED = [(20_000, 32, 256, 20), (20_000, 64, 256, 20), (20_000, 128, 64, 100),
            (20_000, 32, 2048, 10)]  # N, D, B, P
SMALL = [(1_000, 16, 4, 30), (1_000, 8, 8, 40), (1_000, 16, 2, 100)]  # f32 rows


def _row(name: str, dname: str, shape, inputs, fn, reps: int) -> None:
    for cm in (False, True):
        r = compare(fn, inputs, reps, cost_model=cm)
        print(f"{name} | {dname} | {','.join(map(str, shape))} | {'on' if cm else 'off'} | "
              f"{r['xla_ms']:.4f} | {r['ember_ms']:.4f} | {r['measured']:.2f}x | "
              f"{r['rewritten']} | {'yes' if r['same'] else 'NO'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print("kind | dtype | N,D,B,P | cost model | XLA ms | ember ms | ratio | rewritten | "
          "bit-equal")
    for dname, dt in DTYPES.items():
        for n, d, b, p in WEIGHTED:
            rng = np.random.default_rng(0)
            inputs = [rng.standard_normal((n, d)).astype(dt),
                      rng.integers(0, n, (b, p)).astype(np.int32),
                      rng.uniform(0.5, 1.0, (b, p)).astype(dt)]
            _row("weighted", dname, (n, d, b, p), inputs,
                 lambda t, i, w: (t[i] * w[..., None]).sum(1), args.reps)
    for n, d, b, p in WEIGHTED:
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((n, d)).astype(np.float32),
                  rng.integers(0, n, (b, p)).astype(np.int32)]
        scale = np.float32(np.sqrt(d))
        _row("scaled", "f32", (n, d, b, p), inputs,
             lambda t, i, s=scale: (jnp.take(t, i, axis=0) * s).sum(1), args.reps)
    for n, d, b, p in SMALL:
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((n, d)).astype(np.float32),
                  rng.integers(0, n, (b, p)).astype(np.int32)]
        _row("sum", "f32", (n, d, b, p), inputs, lambda t, i: t[i].sum(1), args.reps)


if __name__ == "__main__":
    main()
