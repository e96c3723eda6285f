"""Optimizer updates fused into the lookup's gradient (``ember.sparse_sgd`` /
``ember.sparse_adagrad``): whole training steps bit-identical to XLA's (loss, updated table,
optimizer state) where the fused update is exact, and the update left in XLA, with a reason,
where it is not (Adam, momentum, weight decay, global-norm clipping, a gradient used twice)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.hlo_import.proto import module_from_proto
from ember_xla.native.rsqrt_probe import rsqrt_matches_xla
from ember_xla.rewrites.patterns import ScatterGrad

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

GRAD_ONLY = [ScatterGrad()]


def optimizers(r):
    return [c.get("optimizer") for c in ts.backward(r)]


def setup(seed, lo=0, hi=12):
    rng = np.random.default_rng(seed)
    w, t = ts.head(rng), ts.table(rng)
    t[ts.V - 1] = -0.0  # an untouched -0 row: kept only where t + 0 * s keeps it
    ids, y = ts.batch(rng, lo, hi)
    return w, t, ids, y


@pytest.mark.parametrize("lr", [0.1, 0.0, 2.0])
@pytest.mark.parametrize("lo,hi", [(0, 6), (-70, 70)])
def test_optax_sgd(lr, lo, hi):
    w, t, ids, y = setup(1, lo, hi)
    opt = optax.sgd(lr)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y)
    assert optimizers(r) == ["sgd"]
    (e,) = ts.backward(r)
    assert e["custom_call"].startswith("ember_sparse_sgd")


@pytest.mark.parametrize("lr", [0.1, 0.0, -0.1, np.inf, np.nan])
def test_hand_written_sgd_with_a_runtime_learning_rate(lr):
    # lr <= 0, inf and NaN change rows without gradient: the kernel then updates every row
    w, t, ids, y = setup(2)
    r = ts.check_step(ts.sgd_step_lr_arg(ts.bag_index(w)), t, np.float32(lr), ids, y)
    assert optimizers(r) == ["sgd"]


def test_hand_written_sgd_constant_lr():
    w, t, ids, y = setup(3, -5, 70)
    r = ts.check_step(ts.sgd_step(ts.bag_index(w), 0.05), t, ids, y)
    assert optimizers(r) == ["sgd"]


@pytest.mark.skipif(not rsqrt_matches_xla(), reason="the kernel's rsqrt is not XLA:CPU's on "
                    "this CPU, so Adagrad is not fused here (see the refusal test)")
@pytest.mark.parametrize("init,eps", [(0.1, 1e-7), (0.0, 1e-7), (0.5, 0.0)])
@pytest.mark.parametrize("lo,hi", [(0, 5), (-70, 70)])
def test_optax_adagrad(init, eps, lo, hi):
    w, t, ids, y = setup(4, lo, hi)
    opt = optax.adagrad(0.3, initial_accumulator_value=init, eps=eps)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y)
    assert optimizers(r) == ["adagrad"]


@pytest.mark.skipif(not rsqrt_matches_xla(), reason="the kernel's rsqrt is not XLA:CPU's on "
                    "this CPU, so Adagrad is not fused here (see the refusal test)")
def test_optax_adagrad_negative_zero_accumulators():
    # g * g + a turns an untouched accumulator's -0 into +0: the kernel must too, though the
    # rule keeps the untouched rows' table entries
    w, t, ids, y = setup(5, 0, 5)
    opt = optax.adagrad(0.3, initial_accumulator_value=0.0)
    state = opt.init(t)
    acc = np.asarray(state[0].sum_of_squares).copy()
    acc[ts.V - 1, ::2] = -0.0  # untouched (ids < 5)
    acc[1, 1] = -0.0  # touched
    state = (state[0]._replace(sum_of_squares=acc), *state[1:])
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, state, ids, y)
    assert optimizers(r) == ["adagrad"]


def test_adagrad_refused_when_rsqrt_differs():
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.ir.rewriter import PatternRewriter
    from ember_xla.rewrites.canonicalize import canonicalize
    from ember_xla.rewrites.fuse_optimizer import fuse_optimizers
    from ember_xla.rewrites.matcher import find_clusters
    from ember_xla.rewrites.outline import outline

    w, t, ids, y = setup(5)
    opt = optax.adagrad(0.3)
    m = from_jax(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y).module
    canonicalize(m)
    rw = PatternRewriter()
    (c,) = find_clusters(m, GRAD_ONLY).clusters
    cc = outline(m, c, 0, rw)
    (fields,) = fuse_optimizers(m, rw, adagrad_ok=False).values()
    assert fields["optimizer"] is None and "rsqrt" in fields["optimizer_reason"]
    assert cc.parent is not None  # the gradient kernel stays


UPDATES = [optax.adam(0.1), optax.sgd(0.1, momentum=0.9), optax.adamw(0.1, weight_decay=0.01),
           optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))]


def nonzero(state):
    """``state`` with its table-shaped slots (momentum, moments) random: from ``opt.init``'s
    zeros a rule that ignores them would still give XLA's bits."""
    rng = np.random.default_rng(14)
    return jax.tree.map(lambda x: (np.abs(rng.standard_normal(x.shape)) * 0.1).astype(x.dtype)
                        if np.ndim(x) == 2 else x, state)


@pytest.mark.parametrize("opt", UPDATES, ids=["adam", "momentum", "adamw", "global-norm-clip"])
def test_updates_that_change_untouched_rows_stay_in_xla(opt):
    w, t, ids, y = setup(6)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, nonzero(opt.init(t)), ids, y)
    if opt is UPDATES[1]:  # the trace g + 0.9 * m: XLA rebases the scatter onto 0.9 * m
        (e,) = ts.backward(r)
        assert e["kind"] == "ordered_scatter" and e["optimizer"] is None
        assert "folds into the scatter-add" in e["optimizer_reason"]
        return
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "stays in XLA" in e["optimizer_reason"]
    assert e["custom_call"].startswith("ember_scatter_grad")


def test_gradient_added_to_a_dense_value_is_an_ordered_scatter():
    # optax.add_decayed_weights: g + wd * t; XLA folds the add into the scatter's operand,
    # and so does the rewrite (ids out of range on both sides: mode=None clamps them)
    w, t, ids, y = setup(13, -5, 70)
    opt = optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1))
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y)
    (e,) = ts.backward(r)
    assert e["kind"] == "ordered_scatter" and e["optimizer"] is None


def test_tied_embedding_gradient_is_an_ordered_scatter():
    # logits = h @ table.T: the table's gradient is the logits' dense gradient plus the
    # lookup's scatter-add, which XLA folds into one scatter onto the dense gradient
    rng = np.random.default_rng(15)
    t = ts.table(rng)
    tok = rng.integers(0, ts.V, (ts.B, 6)).astype(np.int32)
    tok[0, :] = 3  # one token repeated
    tgt = rng.integers(0, ts.V, (ts.B, 6)).astype(np.int32)

    def loss(table, tok, tgt):
        logits = jnp.tanh(table[tok]) @ table.T
        return optax.softmax_cross_entropy_with_integer_labels(logits, tgt).mean()

    r = ts.check_step(ts.sgd_step(loss, 0.1), t, tok, tgt)
    (e,) = ts.backward(r)
    assert e["kind"] == "ordered_scatter" and e["table"]["rows"] == ts.V


def test_momentum_from_nonzero_state_with_edge_values():
    w, t, ids, y = setup(16)
    t[3] = -0.0
    t[4, 2] = np.inf
    opt = optax.sgd(0.1, momentum=0.9)
    state = nonzero(opt.init(t))
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, state, ids, y)
    assert [e["kind"] for e in ts.backward(r)] == ["ordered_scatter"]


def test_gradient_also_returned_is_not_fused():
    w, t, ids, y = setup(7)

    def step(table, ids, y):
        value, g = jax.value_and_grad(ts.bag_index(w))(table, ids, y)
        return value, table - 0.1 * g, g

    r = ts.check_step(step, t, ids, y)
    assert optimizers(r) == [None]


def test_bf16_table_keeps_its_update_in_xla():
    rng = np.random.default_rng(8)
    w, t = ts.head(rng).astype(jnp.bfloat16), ts.table(rng, dtype=jnp.bfloat16)
    ids, y = ts.batch(rng, 0, 9)
    r = ts.check_step(ts.sgd_step(ts.bag_index(w), 0.1), t, ids, y.astype(jnp.bfloat16),
                      patterns=GRAD_ONLY)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "f32" in e["optimizer_reason"]


def test_two_tables_each_fused():
    rng = np.random.default_rng(9)
    w = ts.head(rng)
    t1, t2 = ts.table(rng), ts.table(rng, v=40)
    (a, y), (b, _) = ts.batch(rng, 0, 9), ts.batch(rng, 0, 40)
    opt = optax.adagrad(0.2) if rsqrt_matches_xla() else optax.sgd(0.2)

    def loss(p, a, b, y):
        return ts.mse(p["u"][a].sum(1) + p["v"][b].sum(1), w, y)

    params = {"u": t1, "v": t2}
    r = ts.check_step(ts.optax_step(loss, opt), params, opt.init(params), a, b, y)
    assert len(optimizers(r)) == 2 and None not in optimizers(r)


@pytest.mark.parametrize("donate", [True, False])
def test_no_table_copy_with_or_without_donation(donate):
    """With the table donated (``jax.jit(..., donate_argnums=0)``) the fused call aliases it
    and XLA runs the call on the table's own buffer; without donation the call does not alias
    the parameter (XLA would copy it first) and writes the new table itself. Either way the
    optimized module copies no [V, D] array."""
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    w, t, ids, y = setup(10)
    step = ts.sgd_step(ts.bag_index(w), 0.1)
    lowered = jax.jit(step, donate_argnums=(0,) if donate else ()).lower(t, ids, y)
    m = module_from_proto(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto(), "step")
    r = rewrite_module(m)
    assert optimizers(r) == ["sgd"]
    exe = compile_module(r.module)
    got = exe.run([t, ids, y])
    want = jax.jit(step)(t, ids, y)
    assert all(ts.same_bits(a, b) for a, b in zip(want, got, strict=True))
    hlo = exe.optimized_hlo()
    (call,) = [ln for ln in hlo.splitlines() if 'custom_call_target="ember.sparse_sgd"' in ln]
    assert ("output_to_operand_aliasing" in call) == donate
    copies = [ln for ln in hlo.splitlines() if f"f32[{ts.V},{ts.D}]" in ln and " copy(" in ln]
    assert not copies, copies


@pytest.mark.parametrize("name", ["sgd", "adagrad"])
def test_flax_linen_embed_step(name):
    """A flax.linen model (Embed, bag mean, Dense) trained with optax: the table's update is
    fused, the Dense layer's stays in XLA, the whole step is bit-identical."""
    flax_nn = pytest.importorskip("flax.linen")

    class Model(flax_nn.Module):
        @flax_nn.compact
        def __call__(self, ids):
            e = flax_nn.Embed(ts.V, ts.D)(ids)
            return flax_nn.Dense(1)(e.mean(axis=1))[:, 0]

    rng = np.random.default_rng(11)
    ids, y = ts.batch(rng, 0, 20)
    model = Model()
    params = model.init(jax.random.PRNGKey(0), ids)
    opt = optax.sgd(0.05) if name == "sgd" else optax.adagrad(0.05)

    def loss(params, ids, y):
        return jnp.mean((model.apply(params, ids) - y) ** 2)

    r = ts.check_step(ts.optax_step(loss, opt), params, opt.init(params), ids, y)
    want = name if name == "sgd" or rsqrt_matches_xla() else None
    assert optimizers(r) == [want], ts.backward(r)


@pytest.mark.parametrize("form", ["keras_momentum", "decay"])
def test_update_of_a_product_stays_in_xla(form):
    # Keras' SGD with momentum (m' = m * 0.9 - g * lr; t + m') and a decayed table
    # (t * (1 - wd) - g * lr) look like SGD applied to the product; XLA:CPU contracts one of the
    # two products with the add into an FMA, so a kernel updating the rounded product differs
    w, t, ids, y = setup(11)
    m = (np.random.default_rng(12).standard_normal(t.shape) * 0.1).astype(np.float32)

    def step(table, mom, ids, y):
        value, g = jax.value_and_grad(ts.bag_index(w))(table, ids, y)
        if form == "decay":
            return value, table * 0.99 - g * 0.1, mom
        mom = mom * 0.9 - g * 0.1
        return value, table + mom, mom

    r = ts.check_step(step, t, m, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "product" in e["optimizer_reason"]
    assert e["custom_call"].startswith("ember_scatter_grad")
