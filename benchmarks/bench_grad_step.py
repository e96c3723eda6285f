"""A DLRM-like training step, XLA:CPU vs the rewritten step (backward + fused optimizer).

A benchmark, not a test. The step: k tables (the first k of the MLPerf DLRM-DCNv2 list,
rows capped), D=128, f32, the MLPerf pooling factors, Zipf-distributed ids (a = 1.05), each
table's bags a ``jax.ops.segment_sum`` of ``table[ids]``; the pooled [B, k * D] go through a
linear head into a mean-squared-error loss; ``jax.value_and_grad`` over the tables and the
head, then an optax update (``sgd`` or ``adagrad``) of every parameter. Exported as
``jax.jit(step, donate_argnums=...)`` lowers it, with the parameters (and optimizer state)
donated or not.

Variants, side by side in one process, interleaved (one untimed warm-up each), medians:
  xla       the exported step on XLA:CPU as JAX compiled it;
  ember     the same HLO rewritten by ``ember_xla.rewrites`` (forward clusters, the backward
            as ``ember.scatter_grad``, and SGD/Adagrad fused into ``ember.sparse_*`` calls).
With donation, each run consumes the previous run's updated parameters (as a training loop
does) and both variants update the tables in place; without, every run writes new tables.
Before timing, one step of each variant is checked bit for bit against the other.

    python benchmarks/bench_grad_step.py                       # 4 tables, rows <= 200k
    python benchmarks/bench_grad_step.py --tables 26 --max-rows 100000 --opt adagrad
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from stage_model import MLPERF_ROWS, POOLING


def build(args):
    import jax
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(0)
    rows = [min(r, args.max_rows) for r in MLPERF_ROWS[:args.tables]]
    pools = POOLING[:args.tables]
    d, b = args.dim, args.batch
    tables = [(rng.standard_normal((n, d), np.float32) * 0.01) for n in rows]
    w = (rng.standard_normal((len(rows) * d, 1)) * 0.01).astype(np.float32)
    ids, segs = [], []
    for n, p in zip(rows, pools, strict=True):
        z = (rng.zipf(1.05, b * p) - 1) % n
        ids.append(z.astype(np.int32))
        segs.append(np.repeat(np.arange(b, dtype=np.int32), p))
    y = rng.standard_normal(b).astype(np.float32)
    opt = optax.sgd(args.lr) if args.opt == "sgd" else optax.adagrad(args.lr)

    def loss(params, ids, segs, y):
        pooled = [jax.ops.segment_sum(t[i], s, num_segments=b, indices_are_sorted=True)
                  for t, i, s in zip(params["tables"], ids, segs, strict=True)]
        pred = jnp.concatenate(pooled, axis=1) @ params["w"]
        return jnp.mean((pred[:, 0] - y) ** 2)

    def step(params, state, ids, segs, y):
        value, g = jax.value_and_grad(loss)(params, ids, segs, y)
        updates, state = opt.update(g, state, params)
        return value, optax.apply_updates(params, updates), state

    params = {"tables": tables, "w": w}
    return step, params, opt.init(params), ids, segs, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--max-rows", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--opt", choices=["sgd", "adagrad"], default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-donate", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    step, params, state, ids, segs, y = build(args)
    donate = () if args.no_donate else (0, 1)
    lowered = jax.jit(step, donate_argnums=donate).lower(params, state, ids, segs, y)
    module = module_from_proto(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto(),
                               "train_step")
    t0 = time.perf_counter()
    result = rewrite_module(module)
    rewrite_s = time.perf_counter() - t0
    back = [c for c in result.clusters if c["pass"] == "backward"]
    fwd = [c for c in result.clusters if c["pass"] == "forward"]
    print(f"rewrite: {rewrite_s:.2f} s; {len(fwd)} forward, {len(back)} backward clusters, "
          f"optimizers {[c.get('optimizer') for c in back]}")
    exes = {"xla": compile_module(module), "ember": compile_module(result.module)}
    leaves = jax.tree.leaves((params, state))
    n_param = len(leaves)
    batch = [np.asarray(x) for x in jax.tree.leaves((ids, segs, y))]
    n_out = 1 + n_param

    def fresh():
        with jax.enable_x64(True):
            return [jax.device_put(np.array(x)) for x in leaves]

    # equivalence of one step
    outs = {k: [np.asarray(o) for o in e.run_device(fresh() + batch)] for k, e in exes.items()}
    same = all(a.tobytes() == b.tobytes() for a, b in zip(outs["xla"], outs["ember"],
                                                          strict=True))
    print(f"one step bit-identical: {same}")
    if not same:
        sys.exit("the rewritten step differs from XLA's")
    state_now = {k: fresh() for k in exes}
    with jax.enable_x64(True):
        on_dev = [jax.device_put(x) for x in batch]
    times: dict[str, list[float]] = {k: [] for k in exes}
    for rep in range(args.reps + 1):
        for k, e in exes.items():
            t0 = time.perf_counter()
            out = e.run_device(state_now[k] + on_dev)
            jax.block_until_ready(out)
            dt = time.perf_counter() - t0
            if donate:
                state_now[k] = list(out[1:n_out])
            if rep:
                times[k].append(dt)
    med = {k: statistics.median(v) for k, v in times.items()}
    mode = "donated" if donate else "not donated"
    print(f"{args.tables} tables, rows <= {args.max_rows}, D={args.dim}, B={args.batch}, "
          f"{args.opt}, {mode}, load {os.getloadavg()[0]:.1f}")
    for k, v in med.items():
        print(f"  {k:6s} {v * 1e3:9.1f} ms/step   (runs: "
              + ", ".join(f"{x * 1e3:.0f}" for x in times[k]) + ")")
    print(f"  speedup ember vs xla: {med['xla'] / med['ember']:.2f}x")


if __name__ == "__main__":
    main()
