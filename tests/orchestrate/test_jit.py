"""``ember_xla.jit`` (drop-in for jax.jit: rewrite, cache per signature, fall back) and
``ember_xla.embedding_bag`` (the kernels called directly), against plain JAX on XLA:CPU."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember_xla


def model(params, ids, seg):
    pooled = jax.ops.segment_sum(jnp.take(params["t"], ids, axis=0), seg, num_segments=16)
    return {"out": jnp.tanh(pooled @ params["w"]), "pooled": pooled}


def _data(seed=0, L=50):
    rng = np.random.default_rng(seed)
    params = {"t": rng.standard_normal((200, 8)).astype(np.float32),
              "w": rng.standard_normal((8, 3)).astype(np.float32)}
    ids = rng.integers(-210, 210, L).astype(np.int32)
    seg = rng.integers(-1, 17, L).astype(np.int32)
    return params, ids, seg


def test_jit_matches_jax_and_caches_per_signature():
    f = ember_xla.jit(model)
    for seed, L in ((0, 50), (1, 50), (2, 31)):
        args = _data(seed, L)
        got, want = f(*args), jax.jit(model)(*args)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                        strict=True):
            assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    assert len(f.reports) == 2  # two signatures (L=50, L=31), one compile each
    rep = next(iter(f.reports.values()))
    assert len(rep["clusters"]) == 1 and rep["clusters"][0]["kind"] == "segment_reduce"


def test_jit_keeps_jax_module_with_a_reported_reason(caplog):
    f = ember_xla.jit(lambda x: jnp.sin(x) * 2)
    with caplog.at_level(logging.INFO, logger="ember_xla.jit"):
        y = f(np.ones(4, np.float32))
    assert np.allclose(np.asarray(y), np.sin(1.0) * 2)
    (report,) = f.reports.values()  # the decision is on the object: jax's module was kept
    assert report["clusters"] == []
    assert any("nothing rewritten" in r.message for r in caplog.records)


def test_jit_under_grad_uses_plain_jit():
    f = ember_xla.jit(lambda t, i: jnp.take(t, i, axis=0).sum())
    g = jax.grad(f)(np.ones((5, 2), np.float32), np.array([1, 1, 3], np.int32))
    assert np.asarray(g)[1, 0] == 2.0


@pytest.mark.parametrize("combiner", ["sum", "mean", "max", "min"])
def test_embedding_bag_offsets_and_segments(combiner):
    rng = np.random.default_rng(4)
    t = rng.standard_normal((30, 5)).astype(np.float32)
    ids = rng.integers(0, 30, 12).astype(np.int32)
    offsets = np.array([0, 3, 3, 7, 12], np.int32)  # bag 1 is empty
    got = np.asarray(ember_xla.embedding_bag(t, ids, offsets, combiner=combiner))
    seg = np.repeat(np.arange(4), np.diff(offsets)).astype(np.int32)
    op = {"sum": jax.ops.segment_sum, "mean": jax.ops.segment_sum, "max": jax.ops.segment_max,
          "min": jax.ops.segment_min}[combiner]
    want = np.asarray(op(jnp.asarray(t)[ids], seg, num_segments=4))
    if combiner == "mean":
        cnt = np.maximum(np.diff(offsets), 1)[:, None].astype(np.float32)
        want = want * (np.float32(1) / cnt)
    assert np.array_equal(got, want)
    got2 = np.asarray(ember_xla.embedding_bag(t, ids, segment_ids=seg, num_segments=4,
                                              combiner=combiner))
    assert np.array_equal(got2, want)


def test_embedding_bag_rejects_bad_arguments():
    t = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="exactly one"):
        ember_xla.embedding_bag(t, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="combiner"):
        ember_xla.embedding_bag(t, np.zeros(2, np.int32), np.array([0, 2]), combiner="median")
