"""A hand-built embedding gradient, ``jnp.zeros_like(table).at[ids].add(row_grads)`` next to the
forward lookup ``table[ids]``: JAX writes the ids' index arithmetic (the negative-index wrap,
the reshape to ``[..., 1]``) again for the scatter, so its ids are a copy of the lookup's.
Where the copy is provably the same ids (rewrites/same_value.py: the same parameter through
reshapes, converts there and back and identical pure arithmetic) the scatter is the lookup's
gradient and the SGD/Adagrad update after it is fused; ids passed as a second argument equal in
value are not provably equal, so the scatter and its update stay in XLA with that reason. Every
step bit-identical to XLA's under both excess-precision settings."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

V, D = ts.V, ts.D

# the ids the lookup reads and the ids the hand-built gradient scatters at
COPIES = {
    "same": (lambda ids: ids, lambda ids: ids),
    "flattened": (lambda ids: ids, lambda ids: ids.reshape(-1)),
    "clipped_both": (lambda ids: jnp.clip(ids, 0, V - 1), lambda ids: jnp.clip(ids, 0, V - 1)),
    "converted_there_and_back": (
        lambda ids: ids,
        lambda ids: ids.astype(jnp.uint32).astype(jnp.int32),
    ),
}


def hand_built_step(w, fwd, bwd, update, take=False):
    """Forward ``table[fwd(ids)]`` (or ``jnp.take``), a bag sum and a squared error; the
    gradient of the pooled rows by ``jax.grad``, spread over the bag and scattered by hand at
    ``bwd(ids)``; then ``update(table, g, state)``."""

    def step(table, state, ids, y):
        rows = jnp.take(table, fwd(ids), axis=0) if take else table[fwd(ids)]
        value, gp = jax.value_and_grad(lambda p: ts.mse(p, w, y))(rows.sum(1))
        rg = jnp.broadcast_to(gp[:, None, :], rows.shape)
        at = bwd(ids)
        g = jnp.zeros_like(table).at[at].add(rg.reshape(*at.shape, D))
        return value, *update(table, g, state)

    return step


def sgd(table, g, state):
    return table - 0.1 * g, state


def optax_update(opt):
    def update(table, g, state):
        u, state = opt.update(g, state, table)
        return optax.apply_updates(table, u), state

    return update


def setup(seed, lo=-70, hi=70):
    rng = np.random.default_rng(seed)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, lo, hi)  # duplicates, negative and out-of-range ids
    return w, t, ids, y


@pytest.mark.parametrize("take", [False, True])
@pytest.mark.parametrize("copy", sorted(COPIES))
def test_copied_ids_fuse_sgd(copy, take):
    w, t, ids, y = setup(31)
    fwd, bwd = COPIES[copy]
    r = ts.check_step(hand_built_step(w, fwd, bwd, sgd, take), t, np.float32(0), ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] == "sgd" and e["custom_call"].startswith("ember_sparse_sgd")


ADAGRAD_FUSED = rsqrt_matches_xla()  # else Adagrad stays in XLA (native/rsqrt_probe.py)


@pytest.mark.parametrize(
    "name,opt,copy",
    [("sgd", optax.sgd(0.05), "flattened"), ("adagrad", optax.adagrad(0.2), "same")],
)
def test_copied_ids_fuse_optax(name, opt, copy):
    w, t, ids, y = setup(32)
    fwd, bwd = COPIES[copy]
    r = ts.check_step(hand_built_step(w, fwd, bwd, optax_update(opt)), t, opt.init(t), ids, y)
    fused = name if name == "sgd" or ADAGRAD_FUSED else None
    assert [e["optimizer"] for e in ts.backward(r)] == [fused]


def test_ids_passed_twice_stay_in_xla_with_the_reason():
    # the gradient's ids are a second parameter holding the same values: not provable from
    # the HLO, so no gradient cluster and the dense update stays in XLA
    w, t, ids, y = setup(34)

    def step(table, ids, ids_again, y):
        rows = table[ids]
        value, gp = jax.value_and_grad(lambda p: ts.mse(p, w, y))(rows.sum(1))
        g = jnp.zeros_like(table).at[ids_again].add(jnp.broadcast_to(gp[:, None], rows.shape))
        return value, table - 0.1 * g

    r = ts.check_step(step, t, ids, ids.copy(), y)
    assert not ts.backward(r)
    (miss,) = [n for n in r.near_misses if n["pattern"] == "ember.scatter_grad"]
    assert "not provably the scatter's" in miss["reason"] and "stay in XLA" in miss["reason"]


def test_other_ids_are_not_taken():
    # wrapped (table[ids]) and clipped (.at[clip(ids)]) ids differ for negative ids: no fusion
    w, t, ids, y = setup(35)
    r = ts.check_step(
        hand_built_step(w, lambda i: i, lambda i: jnp.clip(i, 0, V - 1), sgd),
        t,
        np.float32(0),
        ids,
        y,
    )
    assert not ts.backward(r)
