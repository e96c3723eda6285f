"""A bag's reduce feeding a reduce with the same computation and init -- ``t[ids].sum(1)
.sum(-1)``, a loss's ``pooled.sum()``, through a transpose or a keepdims reshape, masked or
scaled rows, a training step's loss -- is merged by XLA:CPU's simplifier into one reduce whose
order of adds is not the bag's: such bags stay in XLA with the reason (rewritten they differed
in the last bits), every output bit-identical with excess precision allowed and not. A
consumer reducing with another computation (``.max(-1)``) or a dot does not merge: still
rewritten.

Below YNNPACK's size XLA:CPU also fuses a bag's reduce into a loop fusion rooted at a reduce
that reads it through elementwise ops (``exp(pooled).sum(-1)``, ``(pooled * 2).sum(-1)``, a
mean of means), adding the rows in another order there: those stay in XLA too; a bag of
YNNPACK's size (its own fusion) under the same consumer is still rewritten."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import training_steps as ts

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

V, B, P = 41, 8, 6


def inputs(d: int, seed: int):
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((V, d)).astype(np.float32)
    ids = rng.integers(-V, V, (B, P)).astype(np.int32)
    mask = rng.random((B, P)) < 0.7
    return t, ids, mask


MERGED = {
    "sum_then_row_sum": lambda t, i: t[i].sum(1).sum(-1),
    "sum_then_total": lambda t, i: jnp.take(t, i, axis=0).sum(1).sum(),
    "transposed": lambda t, i: t[i].sum(1).T.sum(1),
    "keepdims": lambda t, i: t[i].sum(1, keepdims=True).sum(-1),
    "also_an_output": lambda t, i: (lambda p: (p.sum(-1), p * 2))(t[i].sum(1)),
    "scaled": lambda t, i: (t[i] * 2.5).sum(1).sum(-1),
    "masked": None,
    "max_then_max": lambda t, i: t[i].max(1).max(-1),
}


@pytest.mark.parametrize("d", [3, 5])
@pytest.mark.parametrize("name", sorted(MERGED))
def test_merged_bag_stays_in_xla(name, d):
    t, ids, mask = inputs(d, 1)
    if name == "masked":
        r = ts.check_step(lambda t, i, m: jnp.where(m[..., None], t[i], 0).sum(1).sum(-1),
                          t, ids, mask, cost_model=False)
    else:
        r = ts.check_step(MERGED[name], t, ids, cost_model=False)
    assert not r.clusters
    assert any("XLA:CPU merges the two into one reduce" in str(n.get("reason"))
               for n in r.near_misses)


def test_training_step_with_a_summed_loss_keeps_the_bag_in_xla():
    t, ids, _ = inputs(3, 2)
    y = np.random.default_rng(3).standard_normal(B).astype(np.float32)

    def step(t, ids, y):
        value, g = jax.value_and_grad(lambda t: jnp.mean((t[ids].sum(1).sum(-1) - y) ** 2))(t)
        return t - 0.05 * g, value

    r = ts.check_step(step, t, ids, y, cost_model=False)
    assert [c["pass"] for c in r.clusters] == ["backward"]     # the gradient still rewritten


@pytest.mark.parametrize("consumer", ["max", "dot"])
def test_other_consumers_do_not_merge(consumer):
    t, ids, _ = inputs(5, 4)
    if consumer == "max":  # a small bag would be fused into the max's loop (below)
        ids = np.random.default_rng(7).integers(0, V, (64, 20)).astype(np.int32)
    w = np.linspace(-1, 1, 5).astype(np.float32)
    fn = ((lambda t, i: t[i].sum(1).max(-1)) if consumer == "max"
          else (lambda t, i: t[i].sum(1) @ w))
    r = ts.check_step(fn, t, ids, cost_model=False)
    assert [c["pattern"] for c in r.clusters] == ["ember.padded_bag"]


FUSED = {
    "exp_then_sum": lambda t, i: jnp.exp(t[i].sum(1)).sum(-1),
    "scaled_then_sum": lambda t, i: (t[i].sum(1) * 2).sum(-1),
    "mean_of_means": lambda t, i: t[i].mean(1).mean(),
    "squared_error": lambda t, i: ((t[i].sum(1) - 1.0) ** 2).sum(),
}


@pytest.mark.parametrize("bp", [(6, 4), (16, 8)])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_bag_fused_into_a_consumer_reduce_stays_in_xla(name, bp):
    rng = np.random.default_rng(5)
    t = rng.standard_normal((V, 5)).astype(np.float32)
    ids = rng.integers(0, V, bp).astype(np.int32)
    r = ts.check_step(FUSED[name], t, ids, cost_model=False)
    assert not r.clusters
    assert any("fuses the bag's sum into that reduce's loop" in str(n.get("reason"))
               for n in r.near_misses)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_ynnpack_size_bag_under_a_consumer_reduce_is_rewritten(name):
    rng = np.random.default_rng(6)
    t = rng.standard_normal((V, 5)).astype(np.float32)
    ids = rng.integers(0, V, (64, 20)).astype(np.int32)        # 6400 values: YNNPACK's reduce
    r = ts.check_step(FUSED[name], t, ids, cost_model=False)
    assert [c["pattern"] for c in r.clusters] == ["ember.padded_bag"]


def test_batch_one_bag_times_a_vector_stays_in_xla():
    # [1, D] @ [D]: XLA's simplifier makes the dot a multiply and a reduce, into whose loop
    # the bag is fused (rewritten, the loss differed in the last bit for ids [5, 49, 49])
    rng = np.random.default_rng(17)
    t = rng.standard_normal((50, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    ids = np.array([[5, 49, 49]], np.int32)
    r = ts.check_step(lambda t, i: t[i].sum(1) @ w, t, ids, cost_model=False)
    assert not r.clusters
    assert any("reaches dot" in str(n.get("reason")) for n in r.near_misses)


_W = np.random.default_rng(8).standard_normal((64, 8)).astype(np.float32)
#: a layer with [256, 32] outputs: 8192 values, enough for YNNPACK to take the ops after it
_W32 = np.random.default_rng(10).standard_normal((64, 32)).astype(np.float32)
#: [256,16,64] bags (YNNPACK's reduce) read by ops its fusion takes in and computes in other bits
YNN_FUSED = {
    "tanh": lambda t, i: jnp.tanh(t[i].sum(1)),
    "tanh_then_dot": lambda t, i: jnp.tanh(t[i].sum(1)) @ _W,
    "exp_of_mean": lambda t, i: jnp.exp(t[i].mean(1)),
    "scaled_plus_bias": lambda t, i: t[i].sum(1) * 0.3 + 1.0,
    # XLA's simplifier makes the divide a multiply by 0.1: YNNPACK adds the rounded product,
    # XLA's loop (after the rewrite) a fused multiply-add
    "residual_plus_mean": lambda t, i: t[:256] + t[i].sum(1) / 10,
    # YNNPACK rounds the other value's product before the add; XLA's loop, computing the add
    # once the bag is a custom call, contracts it (the model missed it: other bits rewritten)
    "plus_a_product_of_another_value": lambda t, i: t[i].sum(1) + t[:256] * 0.3,
    # the fusion grows through a dense layer: a bag-of-words logistic regression
    "sigmoid_of_a_dense_layer": lambda t, i: jax.nn.sigmoid(t[i].mean(1) @ _W32),
    "tanh_after_two_layers": lambda t, i: jnp.tanh(jax.nn.relu(t[i].sum(1) @ _W32) @ _W32.T),
}
#: ... and by ops that give the same bits whoever computes them (or a reduce after them)
YNN_EXACT = {
    "relu": lambda t, i: jax.nn.relu(t[i].sum(1)),
    "sqrt_abs": lambda t, i: jnp.sqrt(jnp.abs(t[i].sum(1))),
    "scaled": lambda t, i: t[i].sum(1) * 0.3,
    "tanh_then_sum": lambda t, i: jnp.tanh(t[i].sum(1)).sum(-1),
    # the ops YNNPACK computes with the bag stay in a YNNPACK fusion of their own once it is
    # a custom call (read off both optimized modules): softmax's exp, the twins' product
    "softmax_of_a_dense_layer": lambda t, i: jax.nn.softmax(t[i].sum(1) @ _W32 + 1.0),
    "gelu_of_a_dense_layer": lambda t, i: jax.nn.gelu(t[i].mean(1) @ _W32 + 1.0) @ _W32.T,
    "tanh_beside_a_dot": lambda t, i: (lambda p: (jnp.tanh(p), p @ _W))(t[i].sum(1)),
    "relu_of_a_dense_layer_with_bias": lambda t, i: jax.nn.relu(t[i].sum(1) @ _W + 1.0),
    # [256, 1] logits: too few values for YNNPACK, so XLA computes the sigmoid on both sides
    "sigmoid_of_one_logit": lambda t, i: jax.nn.sigmoid(t[i].mean(1) @ _W[:, :1]),
}


def _ynn_bag():
    rng = np.random.default_rng(9)
    return ((rng.standard_normal((2000, 64)) * 0.3).astype(np.float32),
            rng.integers(0, 2000, (256, 16)).astype(np.int32))


@pytest.mark.parametrize("name", sorted(YNN_FUSED))
def test_ynnpack_fused_inexact_readers_keep_the_bag_in_xla(name):
    r = ts.check_step(YNN_FUSED[name], *_ynn_bag(), cost_model=False)
    assert not r.clusters
    assert any("one YNNPACK fusion" in str(n.get("reason")) for n in r.near_misses), \
        r.near_misses


@pytest.mark.parametrize("name", sorted(YNN_EXACT))
def test_ynnpack_exact_readers_leave_the_bag_rewritten(name):
    r = ts.check_step(YNN_EXACT[name], *_ynn_bag(), cost_model=False)
    assert [c["pattern"] for c in r.clusters] == ["ember.padded_bag"]


def test_twins_whose_product_ynnpack_computes_on_both_sides():
    """The bag traced twice is one reduce to XLA's CSE, read by one multiply whose add
    YNNPACK computes: the optimized original shows one of the twins in that fusion, and the
    trial rewrite keeps the product and its add in a YNNPACK fusion, so that twin is
    rewritten; the other (gone from the optimized module) is left to the model, which keeps
    it. Bit-equal either way."""
    r = ts.check_step(lambda t, i: t[i].sum(1) * t[i].sum(1) + 1.0, *_ynn_bag(),
                      cost_model=False)
    assert len(r.clusters) == 1


def test_bf16_mean_plus_a_residual_stays_in_xla():
    """jnp.mean of bf16 rows (summed in f32), rounded to bf16, plus bf16 values: the product
    by 1/P reaches the add through the convert, and XLA's loop with excess precision drops
    that rounding and fuses the multiply-add (measured: other bits rewritten)."""
    t, i = _ynn_bag()
    t = jnp.asarray(t).astype(jnp.bfloat16)
    r = ts.check_step(lambda t, i: t[i].mean(1) + t[:256], t, i, cost_model=False)
    assert not r.clusters
    assert any("one YNNPACK fusion" in str(n.get("reason")) for n in r.near_misses)


@pytest.mark.parametrize("b, kept", [(2048, True), (128, False)])
def test_weights_computed_inside_the_bags_fusion(b, kept):
    """Rows times tanh(s) per lookup: YNNPACK's fusion of the bag grows upwards into the
    weights' tanh when it has 4096+ values ([2048, 20]: YNNPACK's tanh, so the bag stays in
    XLA); [128, 20] weights are XLA's on both sides and the bag is rewritten."""
    rng = np.random.default_rng(11)
    t = rng.standard_normal((3000, 32)).astype(np.float32)
    i = rng.integers(0, 3000, (b, 20)).astype(np.int32)
    s = rng.standard_normal((b, 20)).astype(np.float32)
    r = ts.check_step(lambda t, i, s: (t[i] * jnp.tanh(s)[..., None]).sum(1), t, i, s,
                      cost_model=False)
    assert (not r.clusters) == kept, r.near_misses
    if kept:
        assert any("YNNPACK fusion" in str(n.get("reason")) and "tanh" in str(n.get("reason"))
                   for n in r.near_misses), r.near_misses


def test_a_bag_written_twice_is_one_reduce_with_two_readers():
    """``t[i].sum(1)`` traced twice (each reduce with a combining computation of its own, equal
    op for op): XLA's CSE makes it one reduce read by ``tanh`` and a dot, which YNNPACK fuses
    none of, so both copies are rewritten (bit-equal, measured); judging each copy as if alone
    kept the ``tanh`` copy in XLA, where YNNPACK then fused its ``tanh``: not bit-equal."""
    r = ts.check_step(lambda t, i: (jnp.tanh(t[i].sum(1)), t[i].sum(1) @ _W), *_ynn_bag(),
                      cost_model=False)
    assert [c["pattern"] for c in r.clusters] == ["ember.padded_bag"] * 2
