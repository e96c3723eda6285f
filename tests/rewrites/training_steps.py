"""Training steps of embedding models written as JAX users write them (``jax.value_and_grad``
of a loss, an optax or hand-written update), the equivalence check every backward rewrite
must pass, and the distractors the backward pattern must leave alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import RewriteResult, rewrite_module
from ember_xla.runtime.execute import run_module

V, D, B, P = 60, 8, 32, 4
OPTIONS = ({"xla_allow_excess_precision": True}, {"xla_allow_excess_precision": False})


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bits, NaN positions (not payloads) compared for floats."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind != "f" and str(a.dtype) != "bfloat16":
        return bool(np.array_equal(a, b))
    na, nb = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return bool(np.array_equal(na, nb)
                and np.array_equal(np.where(na, 0, a.view(uint)), np.where(nb, 0, b.view(uint))))


def flat(args: tuple[Any, ...]) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(args)]


def check_step(fn: Callable, *args: Any, **rewrite: Any) -> RewriteResult:
    """Export ``fn`` as ``jax.jit`` lowers it, rewrite it, and run both on XLA:CPU with
    excess precision allowed and not: every output must have the same bits."""
    m = from_jax(fn, *args).module
    r = rewrite_module(m, **rewrite)
    ins = flat(args)
    for opts in OPTIONS:
        want, got = run_module(m, ins, opts), run_module(r.module, ins, opts)
        bad = [i for i, (a, b) in enumerate(zip(want, got, strict=True)) if not same_bits(a, b)]
        assert not bad, f"outputs {bad} differ under {opts}"
    return r


def backward(r: RewriteResult) -> list[dict[str, Any]]:
    return [c for c in r.clusters if c["pass"] == "backward"]


# -- losses -----------------------------------------------------------------------------------
def head(rng: np.random.Generator, d: int = D) -> np.ndarray:
    return rng.standard_normal((d, 1)).astype(np.float32)


def mse(pooled: jnp.ndarray, w: np.ndarray, y: jnp.ndarray) -> jnp.ndarray:
    return jnp.mean(((pooled @ w)[..., 0] - y) ** 2)


def bag_take(w, mode=None):
    def loss(table, ids, y):
        return mse(jnp.take(table, ids, axis=0, mode=mode).sum(1), w, y)
    return loss


def bag_index(w):
    def loss(table, ids, y):
        return mse(table[ids].sum(1), w, y)
    return loss


def bag_weighted(w):
    def loss(table, ids, wts, y):
        return mse((table[ids] * wts[..., None]).sum(1), w, y)
    return loss


def bag_segments(w, n_bags):
    def loss(table, ids, seg, y):
        return mse(jax.ops.segment_sum(table[ids], seg, num_segments=n_bags), w, y)
    return loss


def tokens(w):
    def loss(table, ids, y):  # a token embedding without pooling: [B, T, D] into the head
        return mse(table[ids], w, y)
    return loss


# -- steps ------------------------------------------------------------------------------------
def optax_step(loss: Callable, opt: optax.GradientTransformation) -> Callable:
    def step(table, state, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        updates, state = opt.update(g, state, table)
        return value, optax.apply_updates(table, updates), state
    return step


def optax_rowwise_adagrad(lr: float, eps: float = 1e-8) -> optax.GradientTransformation:
    """Rowwise Adagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD) as a user writes it for optax, the
    accumulators from 0: its update ``-lr * g / (sqrt(a) + eps)`` is added to the table by
    ``optax.apply_updates``."""
    def init(p):
        return jax.tree.map(lambda x: jnp.zeros(x.shape[:1], x.dtype), p)

    def update(g, acc, params=None):
        acc = jax.tree.map(lambda a, g: a + jnp.mean(g * g, axis=1), acc, g)
        return jax.tree.map(lambda g, a: -lr * g / (jnp.sqrt(a)[:, None] + eps), g, acc), acc

    return optax.GradientTransformation(init, update)


def sgd_step(loss: Callable, lr: float) -> Callable:
    def step(table, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        return value, table - lr * g
    return step


def sgd_step_lr_arg(loss: Callable) -> Callable:
    def step(table, lr, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        return value, table - lr * g
    return step


def grad_fn(loss: Callable) -> Callable:
    return jax.value_and_grad(loss)


def batch(rng: np.random.Generator, lo: int = 0, hi: int = V, b: int = B, p: int = P):
    ids = rng.integers(lo, hi, (b, p)).astype(np.int32)
    y = rng.standard_normal(b).astype(np.float32)
    return ids, y


def table(rng: np.random.Generator, v: int = V, d: int = D, dtype=np.float32) -> np.ndarray:
    return (rng.standard_normal((v, d)) * 0.5).astype(np.float32).astype(dtype)


def fused_here(kind: str) -> bool:
    """Does the CPU rewrite fuse this Adagrad update (``sparse_adagrad`` or
    ``sparse_rowwise_adagrad``) on this CPU: its rsqrt (native/rsqrt_probe.py), or the corpus
    steps' row-wise mean order (native/row_mean_order.py) reproduced? Elsewhere the update
    stays in XLA and there is no call to test."""
    from ember_xla.native.row_mean_order import OrderNotReproduced, row_mean_order
    from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

    if kind == "sparse_adagrad":
        return rsqrt_matches_xla()
    try:
        return all(row_mean_order(v, d) for v, d in ((256, 32), (128, 64)))
    except OrderNotReproduced:
        return False
