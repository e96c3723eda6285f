"""XLA:CPU's fold of ``A + scatter-add(0, ids, rows)`` into ``scatter-add(A, ids, rows)`` as
users write it -- a GNN residual ``h + segment_sum(t[src], dst, N)``, GIN's
``(1 + eps) * h + ...``, an optax momentum SGD step (``g + 0.9 * m``) -- rewritten with
``rewrite_module``'s defaults (``ember.ordered_scatter`` onto A) and run against the original
module on XLA:CPU, alternating in one process (``sweep.compare_module``), medians, outputs
compared bit for bit. A benchmark, not a test.

    cd /tmp && python /path/to/benchmarks/bench_scatter_fold.py --reps 11 [--small] [--rewrite_all]
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from sweep import jax_row

# (nodes N, edges E, D)
GNN = [(100, 64, 8), (1_000, 1_000, 16), (10_000, 100, 64), (10_000, 100_000, 32),
       (100_000, 1_000_000, 64)]
# (table rows V, batch B, bag P, D)
MOMENTUM = [(1_000, 16, 4, 16), (100_000, 256, 20, 64), (1_000_000, 256, 20, 64)]


def residual(t, src, dst, h):
    import jax

    return h + jax.ops.segment_sum(t[src], dst, h.shape[0])


def gin(t, src, dst, h):
    import jax

    return 1.1 * h + jax.ops.segment_sum(t[src], dst, h.shape[0])


def momentum_step(w):
    import jax
    import jax.numpy as jnp
    import optax

    opt = optax.sgd(0.01, momentum=0.9)

    def loss(table, ids, y):
        return jnp.mean(((jnp.take(table, ids, axis=0).sum(1) @ w)[:, 0] - y) ** 2)

    def step(table, m, ids, y):
        value, g = jax.value_and_grad(loss)(table, ids, y)
        updates, state = opt.update(g, (optax.TraceState(trace=m), optax.EmptyState()), table)
        return value, optax.apply_updates(table, updates), state[0].trace

    return step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--small", action="store_true", help="skip the two largest shapes")
    ap.add_argument("--rewrite_all", action="store_true",
                    help="cost model off: time the ordered scatter (on, the folds stay in XLA)")
    args = ap.parse_args(argv)
    import jax

    jax.config.update("jax_platforms", "cpu")

    rng = np.random.default_rng(0)
    print(f"A + scatter-add folds, {args.reps} alternating reps, medians; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| model | XLA ms | rewritten ms | measured | counted | clusters rewritten | "
          "kept in XLA | == XLA |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    bad = 0
    gnn = GNN[:-1] if args.small else GNN
    for name, fn in (("residual", residual), ("GIN", gin)):
        for n, e, d in gnn:
            t = rng.standard_normal((n, d)).astype(np.float32)
            h = rng.standard_normal((n, d)).astype(np.float32)
            src = rng.integers(0, n, e).astype(np.int32)
            dst = rng.integers(0, n, e).astype(np.int32)
            bad += jax_row(f"{name} N={n} E={e} D={d}", fn, (t, src, dst, h), args.reps,
                           cost_model=not args.rewrite_all)
    for v, b, p, d in MOMENTUM[:-1] if args.small else MOMENTUM:
        w = rng.standard_normal((d, 1)).astype(np.float32)
        t = (rng.standard_normal((v, d)) * 0.1).astype(np.float32)
        m = (rng.standard_normal((v, d)) * 0.01).astype(np.float32)
        ids = rng.integers(0, v, (b, p)).astype(np.int32)
        y = rng.standard_normal(b).astype(np.float32)
        step = momentum_step(w)
        bad += jax_row(f"momentum SGD V={v} B={b} P={p} D={d}", step, (t, m, ids, y),
                       args.reps, cost_model=not args.rewrite_all)
    print(f"rows below 1.0x or not bit-equal: {bad}; load average {os.getloadavg()[0]:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
