"""flax.nnx with ``ember_xla.jit`` and ``ember_xla.nnx_jit``. The functional pattern of the
README (``nnx.split`` the model and optimizer, ``nnx.merge`` inside, return ``nnx.state``)
rewrites the forward bag, the lookup's gradient and the fused Adagrad update, and the new
state equals ``jax.jit``'s bit for bit; mutating the module inside is lost under ``jax.jit``
and ``ember_xla.jit`` alike (the README says so), and kept under ``nnx.jit`` and
``ember_xla.nnx_jit`` alike, which rewrites the same clusters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ember_xla

nnx = pytest.importorskip("flax.nnx")


class Bag(nnx.Module):
    def __init__(self, rngs):
        self.emb = nnx.Embed(2000, 16, rngs=rngs)
        self.lin = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, ids):
        return self.lin(self.emb(ids).sum(1))[:, 0]


def _loss(model, ids, y):
    return ((model(ids) - y) ** 2).mean()


def test_functional_nnx_step_rewrites_and_equals_jax_jit():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2000, (64, 5)).astype(np.int32)
    ids[0, :] = 7                                              # duplicate ids in one bag
    y = rng.standard_normal(64).astype(np.float32)
    model = Bag(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adagrad(0.1), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))

    def step(state, ids, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(_loss)(model, ids, y)
        optimizer.update(model, grads)
        return loss, nnx.state((model, optimizer))

    ours = ember_xla.jit(step, donate_argnums=0)
    theirs = jax.jit(step, donate_argnums=0)
    s1, s2 = jax.tree.map(jnp.copy, state), jax.tree.map(jnp.copy, state)
    for _ in range(2):
        l1, s1 = ours(s1, ids, y)
        l2, s2 = theirs(s2, ids, y)
        assert np.asarray(l1).tobytes() == np.asarray(l2).tobytes()
    for a, b in zip(jax.tree.leaves(s1), jax.tree.leaves(s2), strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    (report,) = ours.reports.values()
    passes = {(c["pass"], c.get("optimizer")) for c in report["clusters"]}
    assert ("forward", None) in passes and ("backward", "adagrad") in passes, report


def test_mutating_the_module_inside_is_lost_as_under_jax_jit():
    ids = np.zeros((4, 3), np.int32)
    y = np.ones(4, np.float32)
    for jit in (jax.jit, ember_xla.jit):
        model = Bag(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        before = np.asarray(model.emb.embedding[...]).copy()

        def step(model, optimizer, ids, y):
            loss, grads = nnx.value_and_grad(_loss)(model, ids, y)
            optimizer.update(model, grads)
            return loss

        jit(step)(model, optimizer, ids, y)
        assert np.array_equal(np.asarray(model.emb.embedding[...]), before)


@pytest.mark.parametrize("donate", [False, True], ids=["kept", "donated"])
def test_nnx_jit_keeps_the_mutations_and_rewrites(donate):
    """``ember_xla.nnx_jit`` is ``nnx.jit`` compiled through ember_xla.jit: a step that updates
    the model and optimizer in place (as nnx's docs write it) mutates them exactly as under
    ``nnx.jit``, bit for bit over three steps, with the forward bag, the lookup's gradient
    and the fused Adagrad update rewritten; both decorator forms."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 2000, (64, 5)).astype(np.int32)
    ids[0, :] = 7
    y = rng.standard_normal(64).astype(np.float32)
    kw = {"donate_argnums": (0, 1)} if donate else {}
    finals, losses = [], []
    for jit in (nnx.jit, ember_xla.nnx_jit):
        model = Bag(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.adagrad(0.1), wrt=nnx.Param)

        def step(model, optimizer, ids, y):
            loss, grads = nnx.value_and_grad(_loss)(model, ids, y)
            optimizer.update(model, grads)
            return loss

        f = jit(step, **kw) if donate else jit(step)
        losses.append([np.asarray(f(model, optimizer, ids, y)) for _ in range(3)])
        finals.append([np.asarray(x) for x in jax.tree.leaves(nnx.state((model, optimizer)))])
    assert [a.tobytes() for a in losses[0]] == [a.tobytes() for a in losses[1]]
    assert len(finals[0]) == len(finals[1])
    for a, b in zip(*finals, strict=True):
        assert a.tobytes() == b.tobytes()
    (report,) = f.ember_reports.values()
    passes = {(c["pass"], c.get("optimizer")) for c in report["clusters"]}
    assert ("forward", None) in passes and ("backward", "adagrad") in passes, report


def test_nnx_jit_as_a_bare_decorator():
    @ember_xla.nnx_jit
    def predict(model, ids):
        return model(ids)

    model = Bag(nnx.Rngs(0))
    ids = np.arange(40, dtype=np.int32).reshape(8, 5)
    want = nnx.jit(lambda m, i: m(i))(model, ids)
    assert np.asarray(predict(model, ids)).tobytes() == np.asarray(want).tobytes()
    (report,) = predict.ember_reports.values()
    assert [c["kind"] for c in report["clusters"]] == ["padded_bag"], report
