"""Masked padded bags as Keras and flax users write them -- ``Embedding(mask_zero=True)`` +
``GlobalAveragePooling1D``, i.e. ``jnp.where(mask[..., None], t[ids], 0).sum(1) / count`` --
rewritten with ``rewrite_module``'s defaults and run against the original module on XLA:CPU,
alternating in one process (``sweep.compare_module``), medians, outputs compared bit for bit.
Sequences padded to P with id 0 after a random length (the mask is ``ids != 0``); 100k-row
f32 tables. A benchmark, not a test.

    cd /tmp && python /path/to/benchmarks/bench_masked_bag.py --reps 15
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from sweep import jax_row

SHAPES = [(1, 20, 32), (16, 20, 32), (64, 40, 16), (256, 20, 32), (256, 50, 64), (1024, 20, 32),
          (2048, 50, 64), (64, 200, 128)]
ROWS = 100_000


def keras_gap(t, ids):
    import jax.numpy as jnp

    mask = ids != 0
    rows = jnp.where(mask[..., None], jnp.take(t, ids, axis=0), 0)
    count = jnp.maximum(mask.sum(1, keepdims=True), 1).astype(rows.dtype)
    return rows.sum(1) / count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    import jax

    jax.config.update("jax_platforms", "cpu")

    rng = np.random.default_rng(0)
    print(f"masked padded bags (Keras mask_zero + GlobalAveragePooling1D), {ROWS}-row f32 "
          f"tables, {args.reps} alternating reps, medians; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| model | XLA ms | rewritten ms | measured | counted | clusters rewritten | "
          "kept in XLA | == XLA |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    slower = 0
    for b, p, d in SHAPES:
        t = rng.standard_normal((ROWS, d)).astype(np.float32)
        ids = rng.integers(1, ROWS, (b, p)).astype(np.int32)
        ids[np.arange(p)[None, :] >= rng.integers(1, p + 1, (b, 1))] = 0  # padding
        slower += jax_row(f"B={b} P={p} D={d}", keras_gap, (t, ids), args.reps)
    print(f"rows below 1.0x or not bit-equal: {slower}; load average {os.getloadavg()[0]:.2f}")
    return 1 if slower else 0


if __name__ == "__main__":
    raise SystemExit(main())
