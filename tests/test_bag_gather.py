"""A padded ``embedding_bag`` of one row per bag is the gather XLA:CPU makes of the JAX code it
replaces: bit for bit that code's result under ``jax.jit`` (f32/bf16/f16 tables, weighted or
not, every combiner, every index mode, ``xla_allow_excess_precision`` true and false; rows of
-0.0, NaN, infinities and subnormals; negative and out-of-range ids), no custom-call in the
program, and the same gradient as that code. Bags of two rows still call the kernel."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember_xla

N, D, B = 30, 8, 12
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
# (mode, wrap_negative) -> the lookup the jnp code writes for it
LOOKUPS = {
    ("clip", True): lambda t, i: t[i],
    ("fill", True): lambda t, i: jnp.take(t, i, axis=0),
    ("clip", False): lambda t, i: jnp.take(t, i, axis=0, mode="clip"),
}
REDUCE = {
    "sum": lambda r: r.sum(1),
    "mean": lambda r: r.mean(1),
    "max": lambda r: r.max(1),
    "min": lambda r: r.min(1),
    "sqrt_n": lambda r: r.sum(1) / jnp.sqrt(jnp.ones((), r.dtype) * r.shape[1]),
}
OPTIONS = ({"xla_allow_excess_precision": True}, {"xla_allow_excess_precision": False})


def _inputs(dt, p: int = 1):
    rng = np.random.default_rng(7)
    t = (rng.standard_normal((N, D)) * 3).astype(np.float32)
    t[::4] = -0.0                                   # rows of -0.0 (XLA's fold keeps the sign)
    t[1, :3] = [np.nan, np.inf, -np.inf]
    t[2] = np.float32(np.finfo(dt).max)
    t = t.astype(dt)
    tiny = np.finfo(dt).smallest_subnormal          # a copy keeps it; an add under DAZ not
    t[3, :2] = [tiny, -tiny]
    ids = rng.integers(-N - 5, N + 5, (B, p)).astype(np.int32)  # negative and out of range
    ids[:5, 0] = [0, 4, 1, -N, 3]                   # -0.0, NaN, wrapped and subnormal rows
    w = rng.standard_normal((B, p)).astype(np.float32)
    w[::3] = -0.0
    w[1::5] = 2.0
    return t, ids, w.astype(dt)


def _bits(a) -> bytes:
    return np.asarray(a).tobytes()


def _compiled(fn, args, options):
    return jax.jit(fn).lower(*args).compile(options)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", list(REDUCE))
@pytest.mark.parametrize("dname", list(DTYPES))
def test_one_row_bag_is_the_jnp_bag_bit_for_bit(dname, combiner, weighted):
    t, ids, w = _inputs(DTYPES[dname])
    for ((mode, wrap), look), options in itertools.product(LOOKUPS.items(), OPTIONS):
        def jnp_bag(t, i, w, look=look):
            rows = look(t, i)
            return REDUCE[combiner](rows * w[..., None] if weighted else rows)

        def ours(t, i, w, mode=mode, wrap=wrap):
            return ember_xla.embedding_bag(t, i, weights=w if weighted else None,
                                           combiner=combiner, mode=mode, wrap_negative=wrap)

        want = _compiled(jnp_bag, (t, ids, w), options)
        got = _compiled(ours, (t, ids, w), options)
        assert "custom-call" not in got.as_text(), (mode, wrap)
        case = (mode, wrap, options)
        out = got(t, ids, w)
        assert _bits(out) == _bits(want(t, ids, w)), case
        row = np.asarray(out, np.float32)[1]  # a -0.0 row (weighted: times 2): still -0.0
        assert (row == 0).all() and np.signbit(row).all(), case


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrt_n"])
def test_one_row_bag_gradient_is_the_jnp_bags(combiner):
    t, ids, w = _inputs(np.float32)
    t = np.nan_to_num(t, posinf=3.0, neginf=-3.0, nan=1.0)
    cot = np.random.default_rng(1).standard_normal((B, D)).astype(np.float32)

    def jnp_loss(t, w):
        return (REDUCE[combiner](t[ids] * w[..., None]) * cot).sum()

    def loss(t, w):
        return (ember_xla.embedding_bag(t, ids, weights=w, combiner=combiner,
                                        wrap_negative=True) * cot).sum()

    want = jax.jit(jax.grad(jnp_loss, argnums=(0, 1)))(t, w)
    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(t, w)
    for a, b in zip(got, want, strict=True):
        assert _bits(a) == _bits(b)


def test_vmap_of_one_row_bags():
    t, ids, _ = _inputs(np.float32)
    tables = np.stack([t, t[::-1].copy()])
    got = jax.vmap(lambda tt: ember_xla.embedding_bag(tt, ids, mode="fill"))(tables)
    for k in range(2):
        assert _bits(got[k]) == _bits(jax.jit(lambda tt: jnp.take(
            tt, jnp.where(ids < 0, N, ids), axis=0).sum(1))(tables[k]))


def test_two_row_bags_and_other_inits_still_call_the_kernel():
    t, ids, _ = _inputs(np.float32, p=2)
    text = jax.jit(lambda t, i: ember_xla.embedding_bag(t, i)).lower(t, ids).as_text()
    assert "ember.padded_bag" in text
    t1, ids1, _ = _inputs(np.float32)
    text = jax.jit(lambda t, i: ember_xla.embedding_bag(t, i, init=5.0)).lower(
        t1, ids1).as_text()
    assert "ember.padded_bag" in text  # the kernel's rule: every bag starts at the init
    got = np.asarray(ember_xla.embedding_bag(t1, np.clip(ids1, 0, N - 1), init=5.0))
    assert np.array_equal(got, np.float32(5.0) + t1[np.clip(ids1[:, 0], 0, N - 1)],
                          equal_nan=True)
