"""The cost of reading the untouched rows in a donated fused training step: one [V, 128] f32
table, a bag of 20 Zipf ids per example (B = 2048) summed and fed to a linear head, the
update `sgd`, `adagrad` (optax) or `rowwise` (rowwise Adagrad as written by hand), through
``ember_xla.jit`` or ``jax.jit`` with the table and its slot donated; prints the median of 15
steps in ms. Compare kernel builds by running it with ``EMBER_XLA_NATIVE_LIBRARY`` naming each.

    python bench_untouched_scan.py sgd 1000000 ember
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ember_xla

D, B, P = 128, 2048, 20


def main(opt_name: str, v: int, which: str) -> None:
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.zipf(1.1, (B, P)) % v, jnp.int32)
    y = jnp.asarray(rng.standard_normal(B), jnp.float32)
    w = jnp.asarray(rng.standard_normal((D,)), jnp.float32)
    if opt_name == "rowwise":
        def opt_update(g, acc):
            acc = acc + jnp.mean(g * g, axis=1)
            return -0.01 * g / (jnp.sqrt(acc)[:, None] + 1e-8), acc

        def init(t):
            return jnp.zeros((v,), jnp.float32)
    else:
        tx = optax.sgd(0.01) if opt_name == "sgd" else optax.adagrad(0.01)

        def opt_update(g, s):
            return tx.update(g, s)
        init = tx.init

    def step(t, s, ids, y):
        def loss(t):
            return jnp.mean((jnp.take(t, ids, axis=0).sum(1) @ w - y) ** 2)
        value, g = jax.value_and_grad(loss)(t)
        u, s = opt_update(g, s)
        return value, optax.apply_updates(t, u), s

    f = (ember_xla.jit if which == "ember" else jax.jit)(step, donate_argnums=(0, 1))
    t = jnp.asarray(rng.standard_normal((v, D)).astype(np.float32) * 0.01)
    s = init(t)
    _, t, s = f(t, s, ids, y)
    jax.block_until_ready(t)
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        _, t, s = f(t, s, ids, y)
        jax.block_until_ready((t, s))
        times.append(time.perf_counter() - t0)
    if which == "ember":
        fused = [c.get("optimizer") for r in f.reports.values() for c in r["clusters"]
                 if c["pass"] == "backward"]
        print(f"fused: {fused}", file=sys.stderr)
    print(f"{opt_name} {which} V={v}: {np.median(times) * 1e3:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
