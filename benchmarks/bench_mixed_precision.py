"""Bags under mixed precision (f32 tables, bf16 compute) through the front door:
``ember_xla.jit`` with its defaults (cost model on) against ``jax.jit``, alternating in one
process (``bench_jit.rounds``), medians of per-round ratios with their ~95% intervals; outputs
compared bit for bit first.

A benchmark, not a test. The cases:

- ``bag``: ``jnp.take(t.astype(bf16), ids).sum(1)`` (flax ``nn.Embed(dtype=bfloat16)`` over
  f32 parameters), a 1,000,000 x 64 table: the call reads the f32 table as bf16
  (``row_type="bf16"``); before, it read the converted table XLA wrote out on every call, so
  the cost model kept the bag in XLA;
- ``cast_after``: ``jnp.take(t, ids).astype(bf16).sum(1)`` (rows cast after the gather);
- ``recsys``: two ``nn.Embed(dtype=bfloat16)`` bags concatenated with 13 dense features into
  ``nn.Dense(64, dtype=bfloat16)``, relu, ``nn.Dense(1, dtype=bfloat16)``.

    python benchmarks/bench_mixed_precision.py
    python benchmarks/bench_mixed_precision.py --cases recsys --rounds 21
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_jit import forward_cases  # noqa: E402


def bag_case(b: int, rng, after: bool = False):
    import jax.numpy as jnp

    n = 1_000_000 if not after else 200_000
    t = rng.standard_normal((n, 64)).astype(np.float32)
    ids = rng.integers(0, n, (b, 20)).astype(np.int32)

    def f(t, i):
        if after:
            return jnp.take(t, i, axis=0).astype(jnp.bfloat16).sum(1)
        return jnp.take(t.astype(jnp.bfloat16), i, axis=0).sum(1)

    return f"{'cast_after' if after else 'bag'} N={n} B={b}", f, (t, ids)


def recsys_case(b: int, rng):
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class Model(nn.Module):
        @nn.compact
        def __call__(self, dense, a, c):
            pa = nn.Embed(500_000, 32, dtype=jnp.bfloat16)(a).sum(1)
            pc = nn.Embed(100_000, 32, dtype=jnp.bfloat16)(c).mean(1)
            x = jnp.concatenate([dense.astype(jnp.bfloat16), pa, pc], -1)
            h = nn.relu(nn.Dense(64, dtype=jnp.bfloat16)(x))
            return nn.Dense(1, dtype=jnp.bfloat16)(h)[:, 0]

    dense = rng.standard_normal((b, 13)).astype(np.float32)
    a = rng.integers(0, 500_000, (b, 20)).astype(np.int32)
    c = rng.integers(0, 100_000, (b, 20)).astype(np.int32)
    model = Model()
    params = model.init(jax.random.key(0), dense, a, c)
    return f"recsys B={b}", model.apply, (params, dense, a, c)


CASES = {
    "bag": lambda rng: [bag_case(b, rng) for b in (256, 2048)],
    "cast_after": lambda rng: [bag_case(b, rng, after=True) for b in (256, 2048)],
    "recsys": lambda rng: [recsys_case(b, rng) for b in (256, 2048)],
}


def main(argv: list[str] | None = None) -> int:
    # inputs placed once: a numpy 1M-row table would be copied by every call
    return forward_cases(__doc__, CASES, argv, place=True)


if __name__ == "__main__":
    sys.exit(main())
