"""Training steps as a new user writes them with the public libraries, beyond the per-library
basics: learning rates from a schedule (optax and Keras) or injected as optimizer state,
optax.multi_transform with a different optimizer per parameter group, Adagrad spelled as an
optax.chain and element-wise clipping before SGD (haiku), nnx.Optimizer, a two-tower model
sharing one table,
jnp.take(mode='fill', fill_value=0) + segment_sum, gradient accumulation over two
micro-batches, a hand-built gradient (``zeros_like(t).at[ids].add``), rowwise Adagrad with a
``[V, 1]`` accumulator (``keepdims=True``) and an f32 table looked up through a bf16 copy.
Registered into the corpus (training_corpus.STEPS)."""

from __future__ import annotations

import numpy as np
from training_corpus import (
    LR,
    B,
    D,
    E,
    N,
    TrainStep,
    _bag_inputs,
    _ids,
    _jax_step,
    _labels,
    _segments,
    _squared_error_step,
    reg,
)
from training_flax import _flax_linen_build
from training_keras import _keras_build, _keras_inputs

_READOUT = np.linspace(-1.0, 1.0, D, dtype=np.float32)[:, None]


# ---------------------------------------------------------------------------------------
# optax: the learning rate from the step count (a schedule in the optimizer state)
# ---------------------------------------------------------------------------------------


def _sgd_schedule(params):
    import optax

    return optax.sgd(optax.exponential_decay(LR, transition_steps=10, decay_rate=0.9))


def _multi_transform(params):
    import jax
    import optax

    labels = jax.tree_util.tree_map_with_path(
        lambda path, _: "embed" if "Embed" in jax.tree_util.keystr(path) else "head", params
    )
    return optax.multi_transform(
        {"embed": optax.adagrad(optax.cosine_decay_schedule(LR, 100)), "head": optax.adam(1e-3)},
        labels,
    )


reg(
    TrainStep(
        "flax_linen_sgd_exponential_decay",
        "optax",
        "sgd",
        "jax",
        ("padded_bag",),
        ("sgd",),
        _flax_linen_build(_sgd_schedule),
        _bag_inputs,
        notes="optax.sgd(exponential_decay): -lr(count) is a runtime scalar computed "
        "from the step count in the optimizer state; fused as SGD",
    )
)

reg(
    TrainStep(
        "flax_linen_multi_transform_adagrad_cosine_adam",
        "optax",
        "adagrad",
        "jax",
        ("padded_bag",),
        ("adagrad",),
        _flax_linen_build(_multi_transform),
        _bag_inputs,
        notes="optax.multi_transform: Adagrad with a cosine schedule on nn.Embed, Adam "
        "on the head (dense, not a lookup gradient)",
    )
)


def _inject_hyperparams(params):
    import optax

    return optax.inject_hyperparams(optax.adagrad)(learning_rate=LR)


reg(
    TrainStep(
        "flax_linen_inject_hyperparams_adagrad",
        "optax",
        "adagrad",
        "jax",
        ("padded_bag",),
        ("adagrad",),
        _flax_linen_build(_inject_hyperparams),
        _bag_inputs,
        notes="optax.inject_hyperparams(optax.adagrad): the learning rate is optimizer state, "
        "a runtime scalar; fused as Adagrad",
    )
)


# ---------------------------------------------------------------------------------------
# haiku: Adagrad spelled as optax.chain(scale_by_rss, scale); element-wise clipping + SGD
# ---------------------------------------------------------------------------------------


def _haiku_chain_build(make_tx):
    def build():
        import haiku as hk
        import jax

        def net(ids):
            return hk.Linear(1)(hk.Embed(N, D)(ids).mean(1))

        f = hk.without_apply_rng(hk.transform(net))
        ids, y = _bag_inputs("random", np.random.default_rng(0))
        params = f.init(jax.random.key(18), ids)
        tx = make_tx()

        return _squared_error_step(f.apply, params, tx, ids, y)

    return build


def _rss_chain():
    import optax

    return optax.chain(optax.scale_by_rss(initial_accumulator_value=0.1), optax.scale(-LR))


def _clip_chain():
    import optax

    return optax.chain(optax.clip(1.0), optax.sgd(LR))


reg(
    TrainStep(
        "haiku_embed_mean_chain_scale_by_rss",
        "haiku",
        "adagrad",
        "jax",
        ("padded_bag",),
        ("adagrad",),
        _haiku_chain_build(_rss_chain),
        _bag_inputs,
        notes="Adagrad written as optax.chain(scale_by_rss(0.1), scale(-lr)): the same HLO "
        "as optax.adagrad; fused",
    )
)

reg(
    TrainStep(
        "haiku_embed_mean_chain_clip_sgd",
        "haiku",
        "sgd",
        "jax",
        ("padded_bag",),
        (None,),
        _haiku_chain_build(_clip_chain),
        _bag_inputs,
        refusal="clipped element by element",
        notes="optax.chain(optax.clip(1.0), optax.sgd): exact as a sparse update (clip(0) = "
        "0), but the fused kernels have no clipping step: refused with that reason",
    )
)


# ---------------------------------------------------------------------------------------
# flax nnx: nnx.Embed + nnx.Optimizer (the optimizer an nnx object, split/merged with the model)
# ---------------------------------------------------------------------------------------


def _nnx_optimizer_build():
    import optax
    from flax import nnx

    class BagSum(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(N, D, rngs=rngs)
            self.head = nnx.Linear(D, 1, rngs=rngs)

        def __call__(self, ids):
            return self.head(self.embed(ids).sum(1))

    model = BagSum(nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.sgd(optax.linear_schedule(LR, LR / 10, 100)), wrt=nnx.Param)
    graphdef, state = nnx.split((model, opt))

    def train_step(state, ids, y):
        model, opt = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: ((m(ids) - y) ** 2).mean())(model)
        opt.update(model, grads)
        return nnx.state((model, opt)), loss

    ids, y = _bag_inputs("random", np.random.default_rng(0))
    return train_step, [state, ids, y]


reg(
    TrainStep(
        "flax_nnx_optimizer_sgd_linear_schedule",
        "flax",
        "sgd",
        "jax",
        ("padded_bag",),
        ("sgd",),
        _nnx_optimizer_build,
        _bag_inputs,
        notes="nnx.Optimizer(model, optax.sgd(linear_schedule), wrt=nnx.Param) updated "
        "in place inside the step (nnx.split/merge of model and optimizer)",
    )
)


# ---------------------------------------------------------------------------------------
# jax.numpy: a two-tower model sharing one table; gradient accumulation over micro-batches
# ---------------------------------------------------------------------------------------


def _two_tower_inputs(case, rng):
    return [_ids(rng, case), _ids(rng, case), _labels(rng, case)[:, 0]]


def _two_tower_build():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(12)
    table = (rng.standard_normal((N, D)) * 0.5).astype(np.float32)

    def loss(t, q, i, y):
        u, v = t[q].sum(1), jnp.take(t, i, axis=0).mean(1)  # query and item towers
        return ((jnp.sum(u * v, axis=1) - y) ** 2).mean()

    def train_step(t, q, i, y):
        value, g = jax.value_and_grad(loss)(t, q, i, y)
        return t - LR * g, value

    return train_step, [table, *_two_tower_inputs("random", rng)]


_SUMMED = "of another lookup of the table"

reg(
    TrainStep(
        "jax_two_tower_shared_table_sgd",
        "jax.numpy",
        "sgd",
        "jax",
        (),  # both bags stay in XLA: fused into the loop of sum(u * v, 1) (reduce_merge.py)
        (None, None),
        _two_tower_build,
        _two_tower_inputs,
        refusal=_SUMMED,
        notes="one table looked up by both towers (table[q] sum, jnp.take mean): the bags "
        "stay in XLA (XLA:CPU fuses them into the loop of sum(u * v, 1), another order; "
        "rewritten, 12 of 20 seeds differed); two "
        "gradients, each rewritten, summed by XLA before the SGD update, which "
        "stays in XLA (the fused kernel would sum a row's updates in another "
        "order)",
    )
)


def _accumulation_inputs(case, rng):
    return [_ids(rng, case), _ids(rng, case), rng.standard_normal((2, B)).astype(np.float32)]


def _accumulation_build():
    import jax
    import optax

    rng = np.random.default_rng(13)
    table = (rng.standard_normal((N, D)) * 0.5).astype(np.float32)
    tx = optax.adagrad(LR)

    def loss(t, ids, y):
        return (((t[ids].sum(1) @ _READOUT)[:, 0] - y) ** 2).mean()

    def train_step(t, state, a, b, y):
        l1, g1 = jax.value_and_grad(loss)(t, a, y[0])
        l2, g2 = jax.value_and_grad(loss)(t, b, y[1])
        updates, state = tx.update((g1 + g2) / 2, state, t)
        return optax.apply_updates(t, updates), state, l1 + l2

    return train_step, [table, tx.init(table), *_accumulation_inputs("random", rng)]


reg(
    TrainStep(
        "jax_gradient_accumulation_two_micro_batches_adagrad",
        "optax",
        "adagrad",
        "jax",
        ("padded_bag", "padded_bag"),
        (None, None),
        _accumulation_build,
        _accumulation_inputs,
        refusal=_SUMMED,
        notes="two micro-batches, their gradients averaged before optax.adagrad: both "
        "gradients rewritten, the update of their sum stays in XLA",
    )
)


# ---------------------------------------------------------------------------------------
# jnp.take(mode='fill', fill_value=0) + segment_sum: out-of-range lookups give zero rows
# ---------------------------------------------------------------------------------------


def _fill_zero_inputs(case, rng):
    ids = _ids(rng, case, shape=(E,))
    return [ids, _segments(rng, case), _labels(rng, case)[:, 0]]


def _fill_zero_build():
    import jax
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(14)
    table = (rng.standard_normal((N, D)) * 0.5).astype(np.float32)
    tx = optax.sgd(LR)

    def loss(t, ids, seg, y):
        rows = jnp.take(t, ids, axis=0, mode="fill", fill_value=0.0)
        return (((jax.ops.segment_sum(rows, seg, num_segments=B) @ _READOUT)[:, 0] - y) ** 2).mean()

    return _jax_step(loss, tx), [table, tx.init(table), *_fill_zero_inputs("random", rng)]


reg(
    TrainStep(
        "jnp_take_fill_zero_segment_sum_sgd",
        "jax.numpy",
        "sgd",
        "jax",
        ("segment_reduce",),
        ("sgd",),
        _fill_zero_build,
        _fill_zero_inputs,
        notes="the zero fill masks out-of-range lookups before the segment sum: "
        "masked-bag-to-segments gives them an out-of-range segment id",
    )
)


# ---------------------------------------------------------------------------------------
# a hand-built gradient: jnp.zeros_like(table).at[ids].add(row_grads), ids flattened apart
# ---------------------------------------------------------------------------------------


def _hand_built_build():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(15)
    table = (rng.standard_normal((N, D)) * 0.5).astype(np.float32)

    def train_step(t, ids, y):
        rows = t[ids]  # [B, P, D]
        value, gp = jax.value_and_grad(lambda p: (((p @ _READOUT) - y) ** 2).mean())(rows.sum(1))
        row_grads = jnp.broadcast_to(gp[:, None, :], rows.shape).reshape(-1, D)
        g = jnp.zeros_like(t).at[ids.reshape(-1)].add(row_grads)
        return t - LR * g, value

    return train_step, [table, *_bag_inputs("random", rng)]


reg(
    TrainStep(
        "jax_hand_built_gradient_sgd",
        "jax.numpy",
        "sgd",
        "jax",
        ("padded_bag",),
        ("sgd",),
        _hand_built_build,
        _bag_inputs,
        notes="the gradient scattered by hand at ids.reshape(-1): JAX writes the "
        "negative-id wrap again for the scatter; provably the lookup's ids "
        "(rewrites/same_value.py), so the SGD update is fused",
    )
)


# ---------------------------------------------------------------------------------------
# rowwise Adagrad with the accumulator kept as [V, 1] (keepdims=True), YNNPACK-sized
# ---------------------------------------------------------------------------------------

N_RW, D_RW, B_RW, P_RW = 256, 32, 128, 32


def _keepdims_inputs(case, rng):
    return [
        _ids(rng, case, shape=(B_RW, P_RW), n=N_RW),
        rng.standard_normal((B_RW, 1)).astype(np.float32),
    ]


def _keepdims_build():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(16)
    table = (rng.standard_normal((N_RW, D_RW)) * 0.5).astype(np.float32)
    accum = np.zeros((N_RW, 1), np.float32)
    read = np.linspace(-1.0, 1.0, D_RW, dtype=np.float32)[:, None]

    def loss(t, ids, y):
        return ((t[ids].sum(1) @ read - y) ** 2).mean()

    def train_step(t, acc, ids, y):
        value, g = jax.value_and_grad(loss)(t, ids, y)
        acc = acc + jnp.mean(g * g, axis=1, keepdims=True)
        return t - LR * g / (jnp.sqrt(acc) + 1e-8), acc, value

    return train_step, [table, accum, *_keepdims_inputs("random", rng)]


reg(
    TrainStep(
        "jax_rowwise_adagrad_keepdims_accumulator",
        "jax.numpy",
        "rowwise_adagrad",
        "jax",
        ("padded_bag",),
        ("rowwise_adagrad",),
        _keepdims_build,
        _keepdims_inputs,
        donate=(0, 1),
        notes="a [256, 1] accumulator broadcasting over the row by itself: fused, the "
        "kernel reading and writing it as [256] (the same bytes)",
    )
)


# ---------------------------------------------------------------------------------------
# mixed precision: an f32 table looked up through a bf16 copy, optax.apply_updates
# ---------------------------------------------------------------------------------------


def _bf16_copy_build():
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(17)
    table = (rng.standard_normal((N, D)) * 0.5).astype(np.float32)
    tx = optax.sgd(LR)

    def loss(t, ids, y):
        pooled = t.astype(jnp.bfloat16)[ids].sum(1).astype(jnp.float32)
        return ((pooled @ _READOUT - y) ** 2).mean()

    ids, y = _bag_inputs("random", rng)
    return _jax_step(loss, tx), [table, tx.init(table), ids, y]


reg(
    TrainStep(
        "jax_f32_table_bf16_lookup_sgd",
        "optax",
        "sgd",
        "jax",
        ("padded_bag",),
        (None,),
        _bf16_copy_build,
        _bag_inputs,
        refusal="bf16 copy of the table",
        notes="the f32 table cast to bf16 before the lookup: a bf16 gradient converted to "
        "f32 for the update, which stays in XLA (the gradient is rewritten)",
    )
)


# ---------------------------------------------------------------------------------------
# Keras 3 on TensorFlow: SGD with a LearningRateSchedule
# ---------------------------------------------------------------------------------------


def _keras_sgd_schedule():
    import keras

    schedule = keras.optimizers.schedules.ExponentialDecay(LR, decay_steps=10, decay_rate=0.9)
    return keras.optimizers.SGD(schedule)


reg(
    TrainStep(
        "keras_embedding_average_sgd_exponential_decay",
        "keras",
        "sgd",
        "tf",
        ("padded_bag",),
        ("sgd",),
        _keras_build(_keras_sgd_schedule),
        _keras_inputs,
        notes="Keras SGD with an ExponentialDecay schedule (the learning rate computed "
        "from the optimizer's iteration variable): the IndexedSlices scatter into "
        "the variable, rewritten as ember.ordered_scatter",
    )
)
