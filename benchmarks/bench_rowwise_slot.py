"""Rowwise Adagrad with the accumulator kept as [V] or as [V, 1] (``keepdims=True``): the same
step on XLA:CPU and rewritten by ember (the fused ``ember.sparse_rowwise_adagrad``, which reads
and writes a [V, 1] slot through reshapes to and from [V]). A benchmark, not a test.

One table [V, D] f32, padded bags ``table[ids].sum(1)`` of ``--batch`` x ``--pool`` uniform
ids, a linear read-out, squared error, ``jax.value_and_grad``, then
``a <- a + mean(g * g, axis=1[, keepdims=True]); t <- t - lr * g / (sqrt(a) + eps)``; table
and slot donated (updated in place). The four variants run interleaved in one process, in
blocks of 3 runs (the first untimed), the block order rotating every repetition; medians of
the timed runs are printed, and the outputs of the first step are checked bit for bit against
XLA's.

    python benchmarks/bench_rowwise_slot.py --rows 200000 --dim 64 --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

LR, EPS = 0.05, 1e-8


def step_fn(column: bool, read: np.ndarray):
    import jax
    import jax.numpy as jnp

    def loss(t, ids, y):
        return ((t[ids].sum(1) @ read - y) ** 2).mean()

    def step(t, acc, ids, y):
        value, g = jax.value_and_grad(loss)(t, ids, y)
        if column:
            acc = acc + jnp.mean(g * g, axis=1, keepdims=True)
            return t - LR * g / (jnp.sqrt(acc) + EPS), acc, value
        acc = acc + jnp.mean(g * g, axis=1)
        return t - LR * g / (jnp.sqrt(acc)[:, None] + EPS), acc, value

    return step


def variant(args, column: bool, ember: bool):
    """(run, outputs of one step from the start, fused optimizers found)."""
    import jax

    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    rng = np.random.default_rng(args.seed)
    table = (rng.standard_normal((args.rows, args.dim)) * 0.1).astype(np.float32)
    acc = np.zeros((args.rows, 1) if column else args.rows, np.float32)
    ids = rng.integers(0, args.rows, (args.batch, args.pool)).astype(np.int32)
    y = rng.standard_normal((args.batch, 1)).astype(np.float32)
    read = np.linspace(-1.0, 1.0, args.dim, dtype=np.float32)[:, None]
    step = step_fn(column, read)
    jitted = jax.jit(step, donate_argnums=(0, 1))
    start = [table, acc, ids, y]
    if not ember:
        outs = [np.asarray(o) for o in jax.jit(step)(*start)]
        state = [jax.device_put(x) for x in start]

        def run():
            out = jax.block_until_ready(jitted(*state))
            state[:2] = out[:2]

        return run, outs, []
    proto = jitted.lower(*start).compiler_ir("hlo").as_serialized_hlo_module_proto()
    result = rewrite_module(module_from_proto(proto, "bench_rowwise_slot"))
    fused = [c.get("optimizer") for c in result.clusters if c.get("pass") == "backward"]
    loaded = compile_module(result.module)._loaded
    outs = [np.asarray(o) for o in loaded.execute([jax.device_put(x) for x in start])]
    flat = [jax.device_put(x) for x in start]

    def run():
        out = loaded.execute(flat)
        for o in out:
            o.block_until_ready()
        flat[:2] = out[:2]

    return run, outs, fused


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--pool", type=int, default=20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    runs, ref = {}, {}
    for column in (False, True):
        for ember in (False, True):
            name = f"{'ember' if ember else 'xla'} {'[V, 1]' if column else '[V]'}"
            run, outs, fused = variant(args, column, ember)
            if not ember:
                ref[column] = outs
            else:
                same = all(
                    a.tobytes() == b.tobytes() for a, b in zip(outs, ref[column], strict=True)
                )
                print(f"{name}: fused {fused}, first step bit-equal to XLA: {same}")
            runs[name] = run
    times: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for rep in range(args.reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            runs[name]()
            for _ in range(2):
                t0 = time.perf_counter()
                runs[name]()
                times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"{name:14s} median {statistics.median(ts) * 1e3:8.2f} ms  ({len(ts)} runs)")


if __name__ == "__main__":
    main()
