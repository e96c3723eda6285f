"""A flax nnx training step as nnx's docs write it (``@nnx.jit`` over a function that calls
``optimizer.update(model, grads)`` in place): ``nnx.jit`` against ``ember_xla.nnx_jit``.

A benchmark, not a test. The model: ``nnx.Embed(N, D)`` over padded bags ``[B, P]`` summed,
concatenated with a dense input through ``nnx.Linear``, then a read-out; squared error;
optax SGD or Adagrad (the lookup's gradient fused with the update: ``ember.sparse_sgd`` /
``ember.sparse_adagrad``), model and optimizer donated or not. Each variant runs its own
training loop in alternating rounds; the speedup is the median of the per-round ratios with
its ~95% interval (``bench_jit.paired``). The first three steps are compared bit for bit.

    python benchmarks/bench_nnx_jit.py
    python benchmarks/bench_nnx_jit.py --rows 1000 --dim 16 --batch 64 --pooling 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_jit import step_line, training_step_arguments  # noqa: E402


def build(args, optimizer: str):
    import jax.numpy as jnp
    import optax
    from flax import nnx

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.emb = nnx.Embed(args.rows, args.dim, rngs=rngs)
            self.dense = nnx.Linear(8, args.dim, rngs=rngs)
            self.out = nnx.Linear(2 * args.dim, 1, rngs=rngs)

        def __call__(self, ids, x):
            pooled = self.emb(ids).sum(1)
            return self.out(nnx.relu(jnp.concatenate([pooled, self.dense(x)], axis=1)))[:, 0]

    model = Model(nnx.Rngs(0))
    tx = {"sgd": optax.sgd(0.05), "adagrad": optax.adagrad(0.05)}[optimizer]
    return model, nnx.Optimizer(model, tx, wrt=nnx.Param)


def step(model, optimizer, ids, x, y):
    from flax import nnx

    def loss_fn(model):
        return ((model(ids, x) - y) ** 2).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    training_step_arguments(p, rounds=11)
    args = p.parse_args(argv)
    import jax
    from flax import nnx

    import ember_xla

    rng = np.random.default_rng(0)
    batch = (rng.integers(0, args.rows, (args.batch, args.pooling)).astype(np.int32),
             rng.standard_normal((args.batch, 8)).astype(np.float32),
             rng.standard_normal(args.batch).astype(np.float32))
    print(f"load average {os.getloadavg()[0]:.2f}; N={args.rows} D={args.dim} "
          f"B={args.batch} P={args.pooling}")
    for optimizer in ("sgd", "adagrad"):
        for donate in (False, True):
            kw = {"donate_argnums": (0, 1)} if donate else {}
            fns = {"nnx.jit": nnx.jit(step, **kw),
                   "ember_xla.nnx_jit": ember_xla.nnx_jit(step, **kw)}
            states = {k: build(args, optimizer) for k in fns}
            first = {k: [np.asarray(f(*states[k], *batch)) for _ in range(3)]
                     for k, f in fns.items()}
            same = all(a.tobytes() == b.tobytes() for a, b in zip(*first.values(), strict=True))
            same = same and all(
                np.asarray(a).tobytes() == np.asarray(b).tobytes()
                for a, b in zip(*(jax.tree.leaves(nnx.state(s)) for s in states.values()),
                                strict=True))
            runs: dict[str, list[float]] = {k: [] for k in fns}
            order = list(fns)
            for r in range(args.rounds):
                for k in order[r % 2:] + order[:r % 2]:
                    t0 = time.perf_counter()
                    for _ in range(args.steps):
                        loss = fns[k](*states[k], *batch)
                    jax.block_until_ready((loss, nnx.state(states[k][0])))
                    runs[k].append((time.perf_counter() - t0) / args.steps)
            fused = [c.get("optimizer") for r in fns["ember_xla.nnx_jit"].ember_reports.values()
                     for c in r["clusters"] if c["pass"] == "backward"]
            print(step_line(optimizer, donate, runs, "nnx.jit", "ember_xla.nnx_jit", fused, same),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
