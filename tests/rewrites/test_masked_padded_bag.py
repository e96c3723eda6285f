"""Masked padded bags -- ``jnp.where(mask[..., None], rows, 0).sum(1)``, Keras' masked
``GlobalAveragePooling1D`` -- whose rows XLA:CPU adds in an order other than one after the
other: ``ember.padded_bag`` with the mask as its last operand, bit-identical to XLA:CPU with
excess precision allowed and not, for tables holding -0.0, Inf and NaN, ids out of range, and
bags masked out entirely; a masked bag weighted as well stays in XLA with the reason."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import training_steps as ts

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

N = 500


def inputs(b: int, p: int, d: int, seed: int, dtype=np.float32):
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((N, d)).astype(np.float32)
    t[::7] = -0.0
    t[3, 0], t[5, 1], t[11, 2] = np.inf, -np.inf, np.nan
    ids = rng.integers(-3, N + 3, (b, p)).astype(np.int32)  # a few out of range
    mask = rng.random((b, p)) < 0.7
    mask[0] = False                                          # a bag masked out entirely
    mask[1] = True
    ids[2, :] = 3                                            # the Inf row, masked or not
    return t.astype(dtype), ids, mask


def masked_sum(t, ids, mask):
    return jnp.where(mask[..., None], jnp.take(t, ids, axis=0), 0).sum(1)


def masked_mean(t, ids, mask):  # Keras GlobalAveragePooling1D with a propagated mask
    rows = jnp.where(mask[..., None], t[ids], 0)
    return rows.sum(1) / jnp.maximum(mask.sum(1, keepdims=True), 1).astype(rows.dtype)


def masked_clip(t, ids, mask):
    return jnp.where(mask[..., None], jnp.take(t, ids, axis=0, mode="clip"), 0.0).sum(1)


def padded(r) -> list[dict]:
    return [c for c in r.clusters if c["kind"] == "padded_bag"]


@pytest.mark.parametrize("fn", [masked_sum, masked_mean, masked_clip],
                         ids=["sum", "keras_mean", "clip"])
@pytest.mark.parametrize("b,p,d", [(64, 20, 32), (40, 28, 16), (32, 40, 8), (16, 100, 64)])
def test_masked_bag_is_one_call_bit_equal(fn, b, p, d):
    t, ids, mask = inputs(b, p, d, seed=b + p + d)
    r = ts.check_step(fn, t, ids, mask, cost_model=False)
    (c,) = padded(r)
    assert c["attributes"]["sum_order"] in ("blocked", "vector8", "tree32"), c
    assert any("padding mask" in n for n in c["notes"]), c["notes"]


def test_small_masked_bag_is_a_segment_sum():
    # XLA adds a short bag's rows one after the other: the segment form, no mask operand
    t, ids, mask = inputs(8, 4, 8, seed=3)
    r = ts.check_step(masked_sum, t, ids, mask, cost_model=False)
    assert not padded(r) and [c["kind"] for c in r.clusters] == ["segment_reduce"]


def test_masked_and_weighted_stays_in_xla():
    t, ids, mask = inputs(64, 20, 32, seed=4)
    w = np.random.default_rng(5).standard_normal(ids.shape).astype(np.float32)

    def fn(t, ids, mask, w):
        rows = jnp.where(mask[..., None], jnp.take(t, ids, axis=0), 0)
        return (rows * w[..., None]).sum(1)

    r = ts.check_step(fn, t, ids, mask, w, cost_model=False)
    assert not r.clusters
    assert any("masked rows times weights" in n["reason"] for n in r.near_misses), r.near_misses


@pytest.mark.parametrize("b,p,d", [(64, 20, 32), (32, 40, 8)])
@pytest.mark.parametrize("f32_sum", [True, False], ids=["f32_sum", "bf16_sum"])
def test_masked_bf16_bag(b, p, d, f32_sum):
    import ml_dtypes

    t, ids, mask = inputs(b, p, d, seed=b * p, dtype=ml_dtypes.bfloat16)

    def fn(t, ids, mask):
        rows = jnp.where(mask[..., None], t[ids], 0)
        return rows.astype(jnp.float32).sum(1) if f32_sum else rows.sum(1)

    r = ts.check_step(fn, t, ids, mask, cost_model=False)
    assert len(padded(r)) == 1
