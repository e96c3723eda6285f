"""A bag's reduce feeding a reduce with the same computation and init -- ``t[ids].sum(1)
.sum(-1)``, a loss's ``pooled.sum()``, through a transpose or a keepdims reshape, masked or
scaled rows, a training step's loss -- is merged by XLA:CPU's simplifier into one reduce whose
order of adds is not the bag's: such bags stay in XLA with the reason (rewritten they differed
in the last bits), every output bit-identical with excess precision allowed and not. A
consumer reducing with another computation (``.max(-1)``) or a dot does not merge: still
rewritten."""

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
    w = np.linspace(-1, 1, 5).astype(np.float32)
    fn = ((lambda t, i: t[i].sum(1).max(-1)) if consumer == "max"
          else (lambda t, i: t[i].sum(1) @ w))
    r = ts.check_step(fn, t, ids, cost_model=False)
    assert [c["pattern"] for c in r.clusters] == ["ember.padded_bag"]
