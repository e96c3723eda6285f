"""One lookup read in pieces, and message passing at GNN sizes, through the front door:
``ember_xla.jit`` with its defaults (cost model on) against ``jax.jit``, alternating in one
process (``bench_jit.rounds``: A B B A, order rotated), medians of per-round ratios with their
~95% intervals; outputs compared bit for bit first.

A benchmark, not a test. The cases:

- ``concat``: two features' ids concatenated into one lookup, each pooled from its slice of
  the rows (``r = t[concatenate([a, b], 1)]; r[:, :8].sum(1), r[:, 8:].mean(1)``):
  ``lookup-layout`` makes a lookup per slice, two padded bags;
- ``split``: the first 5 positions of a sequence summed, the rest max-pooled (one lookup);
- ``gnn``: a message-passing sum, ``segment_sum(h[src], dst, N)``, E = 8 N edges (TF-GNN's
  ``broadcast_node_to_edges`` + ``pool_edges_to_node`` computes the same);
- ``gnn_mean``: GraphSAGE's mean aggregation, ``jraph.segment_mean(h[src], dst, N)``: the sum
  as above, and the count ``segment_sum(ones_like(h[src]))``, which ``count-as-lookup`` makes
  a segment sum of a lookup of a row of ones;
- ``count``: that count alone.

    python benchmarks/bench_shared_lookups.py
    python benchmarks/bench_shared_lookups.py --cases gnn --rounds 21
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_jit import forward_cases  # noqa: E402


def concat_case(b: int, rng):
    import jax.numpy as jnp

    t = rng.standard_normal((20000, 64)).astype(np.float32)
    a = rng.integers(0, 20000, (b, 8)).astype(np.int32)
    c = rng.integers(0, 20000, (b, 12)).astype(np.int32)

    def f(t, a, c):
        r = t[jnp.concatenate([a, c], 1)]
        return jnp.concatenate([r[:, :8].sum(1), r[:, 8:].mean(1)], 1)

    return f"concat B={b}", f, (t, a, c)


def split_case(b: int, rng):
    t = rng.standard_normal((20000, 64)).astype(np.float32)
    ids = rng.integers(0, 20000, (b, 20)).astype(np.int32)

    def f(t, i):
        r = t[i]
        return r[:, :5].sum(1) + r[:, 5:].max(1)

    return f"split B={b}", f, (t, ids)


def gnn_case(n: int, d: int, rng):
    import jax

    h = rng.standard_normal((n, d)).astype(np.float32)
    src = rng.integers(0, n, 8 * n).astype(np.int32)
    dst = rng.integers(0, n, 8 * n).astype(np.int32)

    def f(h, s, r):
        return jax.ops.segment_sum(h[s], r, num_segments=n)

    return f"gnn N={n} E={8 * n} D={d}", f, (h, src, dst)


def gnn_mean_case(n: int, d: int, rng):
    """GraphSAGE's mean aggregation: jraph.segment_mean of the gathered node states."""
    import jraph

    name, _, args = gnn_case(n, d, rng)

    def mean(h, s, r):
        return jraph.segment_mean(h[s], r, num_segments=n)

    return name.replace("gnn", "mean"), mean, args


def count_case(n: int, d: int, rng):
    """The count segment_mean makes: a segment sum of ones shaped like the gathered states."""
    import jax.numpy as jnp
    import jraph

    name, _, args = gnn_case(n, d, rng)

    def count(h, s, r):
        return jraph.segment_sum(jnp.ones_like(h[s]), r, num_segments=n)

    return name.replace("gnn", "count"), count, args


GNN_SIZES = ((2000, 32), (2000, 128), (20000, 32))
CASES = {
    "concat": lambda rng: [concat_case(b, rng) for b in (256, 2048)],
    "split": lambda rng: [split_case(b, rng) for b in (256, 2048)],
    "gnn": lambda rng: [gnn_case(n, d, rng) for n, d in GNN_SIZES],
    "gnn_mean": lambda rng: [gnn_mean_case(n, d, rng) for n, d in GNN_SIZES],
    "count": lambda rng: [count_case(n, d, rng) for n, d in GNN_SIZES],
}


def main(argv: list[str] | None = None) -> int:
    return forward_cases(__doc__, CASES, argv, place=False)


if __name__ == "__main__":
    sys.exit(main())
