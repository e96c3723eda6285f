"""Lookups of a table computed on every call, rewritten (the custom call takes the whole
computed table, which XLA writes out first) against ``jax.jit`` (which fuses the elementwise
op into the gather and computes only the rows it looks up).

A benchmark, not a test. Two idioms, each at several table sizes:

- ``f16``: flax ``nn.Embed(N, D, dtype=float16)`` (f32 parameters converted to f16 on every
  call), padded bags ``[B, P]`` summed: ``convert`` of N x D elements (a bfloat16 dtype is no
  longer a computed table: the call reads the f32 table as bf16, bench_mixed_precision.py);
- ``gcn``: a GCN layer's message passing, node features scaled by their degree norm
  (``h * norm[:, None]``) gathered along E edges and summed per receiver (``segment_sum``):
  ``multiply`` of N x D elements;
- ``sliced``: ``jax.lax.map`` over 4 stacked tables ``[4, N, D]``, a padded bag ``[B, P]`` per
  table in the loop body, which reads ``dynamic-slice(tables, k)``: sliced-table makes the
  call read the whole stack (a bitcast) instead of the slice written out (N x D per table).

For every case, in one process, ``jax.jit`` and ``ember_xla.jit`` with the cost model off
(every cluster rewritten) alternate in rounds (``bench_jit.rounds``: A B B A, order rotated);
the ratio is the median of the per-round ratios with its ~95% interval. Outputs are compared
bit for bit first. The columns: table rows N, lookups L, their ratio N / L (the rows the
rewrite computes per row XLA computes), times and the speedup of the rewrite.

    python benchmarks/bench_computed_table.py
    python benchmarks/bench_computed_table.py --cases gcn --rows 2000,50000 --rounds 21
    python benchmarks/bench_computed_table.py --cases sliced --rows 10000,200000
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_jit import forward_line  # noqa: E402


def f16_case(n: int, d: int, b: int, p: int, rng):
    import jax.numpy as jnp

    table = rng.standard_normal((n, d)).astype(np.float32)
    ids = rng.integers(0, n, (b, p)).astype(np.int32)

    def f(t, i):
        return t.astype(jnp.float16)[i].sum(1)

    return f, (table, ids), b * p


def gcn_case(n: int, d: int, e: int, rng):
    import jax

    h = rng.standard_normal((n, d)).astype(np.float32)
    norm = rng.uniform(0.1, 1.0, n).astype(np.float32)
    senders = rng.integers(0, n, e).astype(np.int32)
    receivers = rng.integers(0, n, e).astype(np.int32)

    def f(h, norm, s, r):
        return jax.ops.segment_sum((h * norm[:, None])[s], r, num_segments=n)

    return f, (h, norm, senders, receivers), e


def sliced_case(n: int, d: int, b: int, p: int, rng):
    import jax

    tables = rng.standard_normal((4, n, d)).astype(np.float32)
    ids = rng.integers(0, n, (4, b, p)).astype(np.int32)

    def f(ts, i):
        return jax.lax.map(lambda a: a[0][a[1]].sum(1), (ts, i))

    return f, (tables, ids), 4 * b * p


def run_case(name: str, fn, args, lookups: int, n: int, rounds_n: int) -> None:
    import jax

    import ember_xla

    before = os.environ.get("EMBER_XLA_COST_MODEL")
    os.environ["EMBER_XLA_COST_MODEL"] = "off"
    try:
        ours = ember_xla.jit(fn)
        ours(*args)  # compiled (rewritten) with the cost model off
    finally:
        if before is None:
            os.environ.pop("EMBER_XLA_COST_MODEL")
        else:
            os.environ["EMBER_XLA_COST_MODEL"] = before
    print(f"{name:5s} N={n:8d} L={lookups:7d} N/L={n / lookups:6.2f}  "
          f"{forward_line(jax.jit(fn), ours, args, rounds_n, 'rewritten')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="f16,gcn,sliced")
    p.add_argument("--rows", default="2000,20000,50000,200000")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}; cost model off for the rewritten side")
    for case in args.cases.split(","):
        for n in (int(x) for x in args.rows.split(",")):
            if case == "f16":
                fn, xs, lookups = f16_case(n, args.dim, 2048, 20, rng)
            elif case == "gcn":
                fn, xs, lookups = gcn_case(n, args.dim, 40960, rng)
            elif case == "sliced":
                fn, xs, lookups = sliced_case(n, args.dim, 256, 20, rng)
            else:
                p.error(f"unknown case {case!r}; expected f16, gcn or sliced")
            run_case(case, fn, xs, lookups, n, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
