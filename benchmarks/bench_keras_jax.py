"""A Keras 3 training step on the JAX backend (a custom loop: ``stateless_call`` under
``jax.value_and_grad``, then the optimizer's ``stateless_apply``), ``jax.jit`` against
``ember_xla.jit``, with and without the state donated.

A benchmark, not a test. The model: ``Embedding(N, D)`` over padded bags ``[B, P]``,
``GlobalAveragePooling1D``, concatenated with a dense input through ``Dense``, then
``Dense(1)``; MSE loss. Keras' SGD and Adagrad (fused into the lookup's gradient as
``ember.sparse_sgd`` / ``ember.sparse_adagrad_keras``). Each variant runs a training loop
(each step consumes its own previous state) in alternating rounds (``bench_jit.rounds``); the
speedup is the median of the per-round ratios with its ~95% interval. The first step of each
is compared bit for bit.

    KERAS_BACKEND=jax python benchmarks/bench_keras_jax.py
    KERAS_BACKEND=jax python benchmarks/bench_keras_jax.py --rows 1000000 --rounds 11
    KERAS_BACKEND=jax python benchmarks/bench_keras_jax.py --fit   # model.fit, compile_keras
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_jit import paired, ratio_text, step_line, training_step_arguments  # noqa: E402


def keras_model(n: int, d: int, p: int, optimizer: str, lr: float = 0.05):
    """(the model above, its Keras optimizer)."""
    import keras

    ids_in = keras.Input((p,), dtype="int32")
    dense_in = keras.Input((8,))
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(n, d)(ids_in))
    x = keras.layers.Concatenate()([pooled, keras.layers.Dense(d, activation="relu")(dense_in)])
    model = keras.Model([ids_in, dense_in], keras.layers.Dense(1)(x))
    opt = {"sgd": keras.optimizers.SGD(lr), "adagrad": keras.optimizers.Adagrad(lr)}[optimizer]
    return model, opt


def build(n: int, d: int, b: int, p: int, optimizer: str, lr: float = 0.05,
          ids: tuple[int, int] | None = None):
    """(the training step, its initial state, a batch) of the model above; ``ids``: the range
    the batch's ids are drawn from (default [0, n))."""
    import jax
    import jax.numpy as jnp

    model, opt = keras_model(n, d, p, optimizer, lr)
    opt.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    lo, hi = ids or (0, n)
    batch = (rng.integers(lo, hi, (b, p)).astype(np.int32),
             rng.standard_normal((b, 8)).astype(np.float32),
             rng.standard_normal((b, 1)).astype(np.float32))

    def step(state, ids, dense, y):
        tv, ntv, ov = state

        def loss(tv):
            pred, ntv2 = model.stateless_call(tv, ntv, [ids, dense])
            return jnp.mean((pred - y) ** 2), ntv2

        (value, ntv2), g = jax.value_and_grad(loss, has_aux=True)(tv)
        tv2, ov2 = opt.stateless_apply(ov, g, tv)
        return value, (tv2, ntv2, ov2)

    state = ([v.value for v in model.trainable_variables],
             [v.value for v in model.non_trainable_variables], [v.value for v in opt.variables])
    return step, state, batch


def loop_rounds(fns: dict, state, batch, n: int, steps: int) -> dict[str, list[float]]:
    """Per-round mean step times; each variant keeps its own training state."""
    import time

    import jax

    states = {k: jax.tree.map(lambda x: x + 0 if hasattr(x, "dtype") else x, state)
              for k in fns}
    runs: dict[str, list[float]] = {k: [] for k in fns}
    order = list(fns)
    for r in range(n):
        turn = order[r % len(order):] + order[:r % len(order)]
        for k in turn:
            t0 = time.perf_counter()
            for _ in range(steps):
                _, states[k] = fns[k](states[k], *batch)
            jax.block_until_ready(states[k])
            runs[k].append((time.perf_counter() - t0) / steps)
    return runs


def fit_rounds(args) -> None:
    """``model.fit`` as Keras compiles it (jax.jit) vs after ``ember_xla.compile_keras``: two
    copies of one model, one epoch each per round, alternating (unshuffled: Keras shuffles with
    a global generator the two would share); then their weights compared."""
    import time

    import keras

    import ember_xla

    def make(optimizer):
        keras.utils.set_random_seed(1)
        m, opt = keras_model(args.rows, args.dim, args.pooling, optimizer)
        m.compile(optimizer=opt, loss="mse")
        return m

    rng = np.random.default_rng(0)
    n = args.batch * args.steps
    x = [rng.integers(0, args.rows, (n, args.pooling)).astype(np.int32),
         rng.standard_normal((n, 8)).astype(np.float32)]
    y = rng.standard_normal((n, 1)).astype(np.float32)
    for optimizer in ("sgd", "adagrad"):
        models = {"keras (jax.jit)": make(optimizer), "compile_keras": make(optimizer)}
        handle = ember_xla.compile_keras(models["compile_keras"])
        for m in models.values():  # compile and warm up
            m.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)
        runs: dict[str, list[float]] = {k: [] for k in models}
        order = list(models)
        for r in range(args.rounds):
            for k in order[r % 2:] + order[:r % 2]:
                t0 = time.perf_counter()
                models[k].fit(x, y, batch_size=args.batch, epochs=1, verbose=0,
                              shuffle=False)
                runs[k].append((time.perf_counter() - t0) / args.steps)
        same = all(a.tobytes() == b.tobytes() for a, b in zip(
            *(m.get_weights() for m in models.values()), strict=True))
        med = {k: statistics.median(v) for k, v in runs.items()}
        fused = [c.get("optimizer") for c in handle.clusters() if c["pass"] == "backward"]
        print(f"{optimizer:8s} model.fit per step: keras {med['keras (jax.jit)'] * 1e3:8.2f} ms  "
              f"compile_keras {med['compile_keras'] * 1e3:8.2f} ms  speedup "
              f"{ratio_text(paired(runs, 'keras (jax.jit)', 'compile_keras'))}  fused {fused}  "
              f"weights bit-equal: {'yes' if same else 'NO'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    training_step_arguments(p, rounds=9)
    p.add_argument("--fit", action="store_true",
                   help="time model.fit (Keras' own loop, state donated) before and after "
                        "ember_xla.compile_keras instead of the custom loop")
    args = p.parse_args(argv)
    if os.environ.get("KERAS_BACKEND") != "jax":
        p.error("run with KERAS_BACKEND=jax (Keras picks its backend once per process)")
    import jax

    import ember_xla

    print(f"load average {os.getloadavg()[0]:.2f}; N={args.rows} D={args.dim} "
          f"B={args.batch} P={args.pooling}")
    if args.fit:
        fit_rounds(args)
        return 0
    for optimizer in ("sgd", "adagrad"):
        step, state, batch = build(args.rows, args.dim, args.batch, args.pooling, optimizer)
        for donate in (False, True):
            kw = {"donate_argnums": 0} if donate else {}
            ours, theirs = ember_xla.jit(step, **kw), jax.jit(step, **kw)
            first = [jax.tree.leaves(f(jax.tree.map(lambda x: x + 0, state), *batch))
                     for f in (ours, theirs)]
            same = all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                       for a, b in zip(*first, strict=True))
            fused = [c.get("optimizer") for r in ours.reports.values() for c in r["clusters"]
                     if c["pass"] == "backward"]
            runs = loop_rounds({"jax.jit": theirs, "ember_xla.jit": ours}, state, batch,
                               args.rounds, args.steps)
            print(step_line(optimizer, donate, runs, "jax.jit", "ember_xla.jit", fused, same),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
