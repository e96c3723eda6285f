"""Bags and segment sums over f16 and bf16 tables: ``ember_xla.jit`` with every cluster
rewritten (the cost model off) vs ``jax.jit``, the numbers behind which half-precision
clusters the cost model judges and which stay in XLA (``rewrites/profitability.py``:
``vector_half_bag``, ``F16_KEPT``, ``BF16_BAG_KEPT``).

A benchmark, not a test. ``t[ids].sum(1)`` (padded bag) and ``segment_sum(t[ids], seg)``
(sample-major segments) over a 100,000-row table, per dtype and size; the two functions timed
alternately in one process, medians of ``--reps`` runs per round, the ratio XLA / ember per
round (> 1: the rewrite is faster). Also weighted bags (``wbag``: ``(t[ids] * w[..., None])
.sum(1)``, weights of the table's type). Outputs are compared bit for bit.

    python benchmarks/bench_half_tables.py
    python benchmarks/bench_half_tables.py --dtypes float16 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

SIZES = [(256, 4, 32), (1024, 4, 16), (256, 8, 64), (1024, 8, 64), (2048, 32, 64),
         (2048, 32, 128)]
ROWS = 100_000


def _median(f, args, reps: int) -> float:
    import jax

    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def case(dtype: str, kind: str, b: int, p: int, d: int, reps: int, rounds: int) -> str:
    import jax
    import jax.numpy as jnp

    import ember_xla

    rng = np.random.default_rng(0)
    t = jnp.asarray(rng.normal(size=(ROWS, d)), getattr(jnp, dtype))
    ids = jnp.asarray(rng.integers(0, ROWS, (b, p)), jnp.int32)
    if kind == "bag":
        def f(t, i):
            return t[i].sum(1)
        args = (t, ids)
    elif kind == "wbag":
        def f(t, i, w):
            return (t[i] * w[..., None]).sum(1)
        args = (t, ids, jnp.asarray(rng.random((b, p)), getattr(jnp, dtype)))
    else:
        def f(t, i, s):
            return jax.ops.segment_sum(t[i], s, num_segments=b)
        args = (t, ids.reshape(-1), jnp.asarray(np.repeat(np.arange(b), p), jnp.int32))
    fj, fe = jax.jit(f), ember_xla.jit(f)
    same = np.asarray(fj(*args)).tobytes() == np.asarray(fe(*args)).tobytes()
    (report,) = fe.reports.values()
    ratios = [_median(fj, args, reps) / _median(fe, args, reps) for _ in range(rounds)]
    return (f"{dtype:>9} {kind:>4} {b:>5} {p:>3} {d:>4} {len(report['clusters']):>5}  "
            + " ".join(f"{r:.2f}x" for r in ratios) + f"  bitwise: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", nargs="*", default=["float16", "bfloat16"])
    ap.add_argument("--kinds", nargs="*", default=["bag", "wbag", "seg"])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ["EMBER_XLA_COST_MODEL"] = "off"  # every cluster rewritten: the kernels timed
    print(f"{'dtype':>9} {'kind':>4} {'B':>5} {'P':>3} {'D':>4} {'calls':>5}  XLA/ember per round")
    for dtype in a.dtypes:
        for kind in a.kinds:
            for b, p, d in SIZES:
                print(case(dtype, kind, b, p, d, a.reps, a.rounds), flush=True)


if __name__ == "__main__":
    main()
