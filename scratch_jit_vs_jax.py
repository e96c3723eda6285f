"""Reproducer: jax's own HLO proto, compiled the way ember-xla compiles every module
(hlo_to_stablehlo -> compile_and_load, runtime/xla_cpu.compile_proto), gives another loss
(1 ulp) than jax.jit compiling the same function: XLA:CPU turns the forward's
`tot / max(c, 1)` into a multiply by the reciprocal it shares with the backward in jax.jit's
compile, but keeps the true divide after the round trip. So ember_xla.jit differs from jax.jit
outside every cluster whenever it rewrites something in such a step (here ember.sparse_sgd).
Not a rewrite defect: the module before any rewrite already differs."""
import jax
import jax.numpy as jnp
import numpy as np

import ember_xla
from ember_xla.hlo_import.jax_source import hlo_proto_from_jax
from ember_xla.runtime.xla_cpu import compile_proto

rng = np.random.default_rng(0)
V, D, L, S = 41, 3, 30, 7


def fwd(t, i, s):
    tot = jax.ops.segment_sum(t[i], s, S)
    c = jax.ops.segment_sum(jnp.ones_like(s, jnp.float32), s, S)
    return tot / jnp.maximum(c, 1)[:, None]


def step(t, i, s, y):
    def loss(t):
        o = fwd(t, i, s)
        return jnp.mean((jnp.where(jnp.isfinite(o), o, 0).sum(-1) - y) ** 2)
    value, g = jax.value_and_grad(loss)(t)
    return t - 0.05 * g, value


n_diff = 0
for seed in range(20):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((V, D)).astype(np.float32), rng.integers(0, V, L).astype(np.int32),
            rng.integers(-1, 9, L).astype(np.int32), rng.standard_normal(S).astype(np.float32)]
    want = np.asarray(jax.jit(step)(*args)[1])
    raw = np.asarray(compile_proto(hlo_proto_from_jax(step, *args)).run(args)[1])
    ours = np.asarray(ember_xla.jit(step)(*args)[1])
    n_diff += want.tobytes() != raw.tobytes()
    print(seed, want, raw, ours, "raw==jax" if want.tobytes() == raw.tobytes() else "RAW DIFFERS")
print(f"{n_diff}/20 seeds: jax.jit's loss != the round-tripped proto's")
