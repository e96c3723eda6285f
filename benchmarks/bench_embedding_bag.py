"""``ember_xla.embedding_bag`` against the JAX code it replaces, under ``jax.jit``, side by side
in one process: the offsets form against ``jax.ops.segment_sum(jnp.take(...))`` and the padded
``[B, P]`` form against ``jnp.take(...).sum(1)``, 20k-row f32 tables (every 7th row -0.0), batch
1..2048, pooling 1..100, D 16..256. Each pair is compared bit for bit (a -0.0 is not a +0.0),
then timed alternating (``bench_jit.rounds``: every round each variant one way and back, order
rotated): times are medians, ratios the median of the per-round ratios with a 95% confidence
interval, beside the same ratio between two jits of the XLA code (one program: the noise). A
benchmark, not a test. ``embedding_bag`` calls the kernel (there is no cost model on this
path), so small rows show the call's fixed cost against XLA's fused loop; a padded bag of one
row (P=1) is the gather XLA makes of the jnp bag (ember_xla/bag_gather.py).

    cd /tmp && python benchmarks/bench_embedding_bag.py --rounds 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np
from bench_jit import equality, paired, rounds

SHAPES = [(1, 10, 64), (16, 10, 64), (256, 10, 64), (2048, 10, 64), (256, 1, 16),
          (256, 100, 256), (2048, 1, 16), (2048, 100, 128)]  # (B, P, D)
ROWS = 20_000


def pairs(b: int, p: int, d: int, rng) -> list[tuple[str, dict, tuple]]:
    """(form, {"xla": fn, "ember": fn}, arguments) for the offsets and the padded form."""
    import jax
    import jax.numpy as jnp

    import ember_xla

    rows = rng.standard_normal((ROWS, d), dtype=np.float32)
    rows[::7] = -0.0  # XLA's sum of one row keeps it; a kernel adding it to 0 would not
    table = jax.device_put(rows)
    ids = rng.integers(0, ROWS, b * p, dtype=np.int32)
    seg = jax.device_put(np.repeat(np.arange(b, dtype=np.int32), p))
    offsets = jax.device_put(np.arange(b + 1, dtype=np.int32) * p)
    flat, padded = jax.device_put(ids), jax.device_put(ids.reshape(b, p))
    offsets_form = {
        "xla": jax.jit(lambda t, i, s, o: jax.ops.segment_sum(jnp.take(t, i, axis=0), s,
                                                              num_segments=b)),
        "xla again": jax.jit(lambda t, i, s, o: jax.ops.segment_sum(jnp.take(t, i, axis=0), s,
                                                                    num_segments=b)),
        "ember": jax.jit(lambda t, i, s, o: ember_xla.embedding_bag(t, i, o)),
    }
    padded_form = {
        "xla": jax.jit(lambda t, i: jnp.take(t, i, axis=0).sum(1)),
        "xla again": jax.jit(lambda t, i: jnp.take(t, i, axis=0).sum(1)),
        "ember": jax.jit(lambda t, i: ember_xla.embedding_bag(t, i)),
    }
    return [("offsets", offsets_form, (table, flat, seg, offsets)),
            ("padded", padded_form, (table, padded))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args(argv)
    import jax

    jax.config.update("jax_platforms", "cpu")
    rng = np.random.default_rng(0)
    print(f"ember_xla.embedding_bag vs XLA:CPU, {ROWS}-row f32 tables; {args.rounds} rounds of "
          f">= {args.calls} calls and ~2.5 ms each way (A B B A), order rotated; times: medians, "
          f"ratios: medians of the per-round ratios; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| form | B | P | D | XLA us | embedding_bag us | vs XLA (95% CI) | "
          "XLA vs XLA again: the noise (95% CI) | bit-equal |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    slower, clearly_slower, unequal = 0, 0, 0
    for b, p, d in SHAPES:
        for form, fns, call in pairs(b, p, d, rng):
            want, got = fns["xla"](*call), fns["ember"](*call)
            same = "yes" if np.asarray(want).tobytes() == np.asarray(got).tobytes() \
                else equality(want, got) + " (or signs of zero)"
            runs = rounds(fns, call, args.rounds, args.calls)
            med = {k: statistics.median(v) for k, v in runs.items()}
            ratio, lo, hi = paired(runs, "xla", "ember")
            noise = paired(runs, "xla", "xla again")
            slower += ratio < 1.0
            clearly_slower += hi < 1.0
            unequal += same != "yes"
            print(f"| {form} | {b} | {p} | {d} | {med['xla'] * 1e6:.1f} | "
                  f"{med['ember'] * 1e6:.1f} | {ratio:.2f}x ({lo:.2f}-{hi:.2f}) | "
                  f"{noise[0]:.2f}x ({noise[1]:.2f}-{noise[2]:.2f}) | {same} |", flush=True)
    print(f"rows below 1.0x: {slower} (of them below with 95% confidence: {clearly_slower}); "
          f"not bit-equal: {unequal}; load average {os.getloadavg()[0]:.2f}")
    return 1 if unequal else 0


if __name__ == "__main__":
    sys.exit(main())
