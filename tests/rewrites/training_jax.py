"""Training steps written with jax.numpy (two tables, hand-written rowwise Adagrad, a lookup
vmapped over the table's columns as penzai's named axes emit it), haiku, equinox and a
token-embedding language model (optax cross-entropy), registered into the corpus
(training_corpus.STEPS)."""

from __future__ import annotations

import numpy as np
from training_corpus import (
    LR,
    TOL_READOUT_DOT,
    TOL_WEIGHTED_BAG,
    V_LM,
    B,
    D,
    E,
    N,
    P,
    T,
    TrainStep,
    _bag_inputs,
    _ids,
    _jax_step,
    _labels,
    _optax,
    _seg_inputs,
    _segments,
    _squared_error_step,
    reg,
)

# ---------------------------------------------------------------------------------------
# jax.numpy: two tables, jnp.take outside any module (jvp_jit__take__ /
# transpose_jvp_jit__take___ calls), segment_sum bags, hand-written rowwise Adagrad
# ---------------------------------------------------------------------------------------

def _two_table_inputs(case, rng):
    ids_a, ids_b = _ids(rng, case, shape=(E,)), _ids(rng, case, shape=(E,), n=N // 2)
    return [ids_a, ids_b, _segments(rng, case), _labels(rng, case)]


def _two_tables_build():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(6)
    params = {"a": rng.standard_normal((N, D)).astype(np.float32),
              "b": rng.standard_normal((N // 2, D)).astype(np.float32)}
    slots = {k: np.full(v.shape[0], 0.1, np.float32) for k, v in params.items()}

    def loss(p, ids_a, ids_b, seg, y):
        pooled = [jax.ops.segment_sum(jnp.take(p[k], i, axis=0), seg, num_segments=B)
                  for k, i in (("a", ids_a), ("b", ids_b))]
        return ((jnp.concatenate(pooled, 1) @ _READOUT2 - y) ** 2).mean()

    def train_step(p, acc, ids_a, ids_b, seg, y):
        value, g = jax.value_and_grad(loss)(p, ids_a, ids_b, seg, y)
        acc = {k: acc[k] + jnp.mean(g[k] * g[k], axis=1) for k in p}
        new = {k: p[k] - LR * g[k] / (jnp.sqrt(acc[k])[:, None] + 1e-8) for k in p}
        return new, acc, value

    return train_step, [params, slots, *_two_table_inputs("random", rng)]


_READOUT2 = np.linspace(-1.0, 1.0, 2 * D, dtype=np.float32)[:, None]

reg(TrainStep("jnp_take_two_tables_rowwise_adagrad", "jax.numpy", "rowwise_adagrad", "jax",
              ("segment_reduce", "segment_reduce"), (None, None),
              _two_tables_build, _two_table_inputs, donate=(0, 1), tolerance=TOL_READOUT_DOT,
              refusal="LLVM vectorizes across rows",
              notes="jnp.take (fill mode) under value_and_grad: jvp_jit__take__ returns the "
                    "rows and the indices; the transposes are transpose_jvp_jit__take___ "
                    "calls; rowwise Adagrad written by hand, initial accumulator 0.1; "
                    "tables and accumulators donated. The [20, 8] and [10, 8] gradients are "
                    "below YNNPACK's 4096 elements: XLA's own loop sums each row's squares "
                    "in an order that depends on the row (native/row_mean_order.py), so "
                    "both updates stay in XLA with that reason (the gradients are rewritten)"))


# ---------------------------------------------------------------------------------------
# jax.numpy: the same hand-written rowwise Adagrad on tables large enough for XLA:CPU to sum
# the row-wise mean of g * g with YNNPACK, whose order the kernel reproduces: fused
# ---------------------------------------------------------------------------------------

N_RW, D_RW = 256, 32          # 8192 elements: YNNPACK's reduce (native/row_mean_order.py)
N_RW2, D_RW2 = 128, 64        # a second width in the same step
B_RW, P_RW = 128, 32         # a batch the cost model finds worth a native forward


def _rowwise_inputs(case, rng):
    return [_ids(rng, case, shape=(B_RW, P_RW), n=N_RW),
            _ids(rng, case, shape=(B_RW, P_RW), n=N_RW2),
            rng.standard_normal((B_RW, 1)).astype(np.float32)]


def _rowwise_build():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(7)
    params = {"a": (rng.standard_normal((N_RW, D_RW)) * 0.5).astype(np.float32),
              "b": (rng.standard_normal((N_RW2, D_RW2)) * 0.5).astype(np.float32)}
    slots = {k: np.zeros(v.shape[0], np.float32) for k, v in params.items()}
    read = {"a": np.linspace(-1.0, 1.0, D_RW, dtype=np.float32)[:, None],
            "b": np.linspace(1.0, -1.0, D_RW2, dtype=np.float32)[:, None]}

    def loss(p, ids_a, ids_b, y):
        pred = (p["a"][ids_a].sum(1) @ read["a"]                         # table[ids]
                + jnp.take(p["b"], ids_b, axis=0).sum(1) @ read["b"])     # jnp.take (fill)
        return ((pred - y) ** 2).mean()

    def train_step(p, acc, ids_a, ids_b, y):
        value, g = jax.value_and_grad(loss)(p, ids_a, ids_b, y)
        acc = {k: acc[k] + jnp.mean(g[k] * g[k], axis=1) for k in p}
        new = {k: p[k] - LR * g[k] / (jnp.sqrt(acc[k])[:, None] + 1e-8) for k in p}
        return new, acc, value

    return train_step, [params, slots, *_rowwise_inputs("random", rng)]


reg(TrainStep("jax_two_tables_rowwise_adagrad_fused", "jax.numpy", "rowwise_adagrad", "jax",
              ("padded_bag", "padded_bag"), ("rowwise_adagrad", "rowwise_adagrad"),
              _rowwise_build, _rowwise_inputs, donate=(0, 1),
              notes="hand-written rowwise Adagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD, accumulators "
                    "from 0) over a [256, 32] table read with table[ids] and a [128, 64] one "
                    "read with jnp.take: both gradients >= 4096 elements, so XLA:CPU sums "
                    "each row's squares with YNNPACK in the order the kernel reproduces; both "
                    "updates fused in place (tables and accumulators donated)"))


# ---------------------------------------------------------------------------------------
# haiku: hk.Embed (table[ids]: an inline clamped gather) + segment_sum of flat lookups, SGD
# ---------------------------------------------------------------------------------------

def _haiku_build():
    import haiku as hk
    import jax

    def net(ids, seg):
        rows = hk.Embed(N, D)(ids)                        # ARRAY_INDEX lookup
        return hk.Linear(1)(jax.ops.segment_sum(rows, seg, num_segments=B))

    fwd = hk.without_apply_rng(hk.transform(net))
    ids, seg, y = _seg_inputs("random", np.random.default_rng(0))
    params = fwd.init(jax.random.key(1), ids, seg)
    tx = _optax("sgd")

    return _squared_error_step(fwd.apply, params, tx, ids, seg, y)


reg(TrainStep("haiku_embed_segment_sum_sgd", "haiku", "sgd", "jax", ("segment_reduce",),
              ("sgd",), _haiku_build, _seg_inputs, donate=(0,),
              notes="hk.Embed's table[ids] is an inline clamped gather: its scatter-add sits "
                    "in the entry computation; params donated"))


# ---------------------------------------------------------------------------------------
# equinox: eqx.nn.Embedding under vmap, weighted bag sum, filter_value_and_grad, Adagrad
# ---------------------------------------------------------------------------------------

def _weighted_inputs(case, rng):
    w = rng.random((B, P)).astype(np.float32)
    if case != "random":
        w[0, :] = 0.0                                     # a bag with zero weights
    return [_ids(rng, case), w, _labels(rng, case)]


_READOUT = np.linspace(-1.0, 1.0, D, dtype=np.float32)[:, None]


def _eqx_build():
    import equinox as eqx
    import jax

    model = eqx.nn.Embedding(N, D, key=jax.random.key(2))
    tx = _optax("adagrad")

    def loss(m, ids, w, y):
        rows = jax.vmap(jax.vmap(m))(ids)                 # [B, P, D]
        pooled = (rows * w[..., None]).sum(1)              # [B, D] weighted bag sum
        # a fixed read-out (a reduce over D here would be merged by XLA's simplifier with
        # the bag reduce into one reduce of another addition order)
        return ((pooled @ _READOUT - y) ** 2).mean()

    def train_step(m, opt_state, ids, w, y):
        value, grads = eqx.filter_value_and_grad(loss)(m, ids, w, y)
        updates, opt_state = tx.update(grads, opt_state, eqx.filter(m, eqx.is_array))
        return eqx.apply_updates(m, updates), opt_state, value

    ids, w, y = _weighted_inputs("random", np.random.default_rng(0))
    opt_state = tx.init(eqx.filter(model, eqx.is_array))
    return train_step, [model, opt_state, ids, w, y]


reg(TrainStep("equinox_embedding_weighted_bag_adagrad", "equinox", "adagrad", "jax",
              ("padded_bag",), ("adagrad",), _eqx_build, _weighted_inputs,
              tolerance=TOL_WEIGHTED_BAG,
              notes="vmap of eqx.nn.Embedding (dynamic-slice rows -> gather); per-lookup "
                    "weights: the transpose multiplies the broadcast cotangent by them"))


# ---------------------------------------------------------------------------------------
# token-embedding language model: table[tokens] (no pooling) -> tied logits, integer-label
# cross-entropy (optax), SGD
# ---------------------------------------------------------------------------------------

def _lm_inputs(case, rng):
    tokens = _ids(rng, case, shape=(B, T), n=V_LM)
    tokens = np.clip(tokens, 0, V_LM - 1)                 # language models feed valid ids
    if case != "random":
        tokens[0, :] = 3                                  # one token repeated
    return [tokens.astype(np.int32), rng.integers(0, V_LM, (B, T)).astype(np.int32)]


def _lm_build():
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(5)
    params = {"embed": (rng.standard_normal((V_LM, D)) * 0.1).astype(np.float32),
              "mix": (rng.standard_normal((D, D)) * 0.1).astype(np.float32)}
    tx = _optax("sgd")

    def loss(p, tokens, targets):
        h = jnp.tanh(p["embed"][tokens] @ p["mix"])       # [B, T, D], no pooling
        logits = h @ p["embed"].T                         # tied output projection
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    tokens, targets = _lm_inputs("random", rng)
    return _jax_step(loss, tx), [params, tx.init(params), tokens, targets]


reg(TrainStep("lm_token_embedding_tied_sgd", "optax", "sgd", "jax", (), (None,),
              _lm_build, _lm_inputs, donate=(0,), refusal="stays in XLA",
              notes="a lookup without reduction is no forward cluster; the tied table also "
                    "gets a dense gradient from the logits, so its update is not sparse and "
                    "stays in XLA; XLA folds that add into the lookup's scatter-add (its rows "
                    "added onto the dense gradient), rewritten as that ember.ordered_scatter; "
                    "the integer-label cross-entropy's take_along_axis transposes to a "
                    "zero-initialised scatter-add over [B, T, V] that is not a table gradient"))



# ---------------------------------------------------------------------------------------
# haiku: one hk.Embed of F features' ids [B,F,P] (per-feature offsets), summed over P, SGD
# ---------------------------------------------------------------------------------------

F_FEATURES = 3


def _features_inputs(case, rng):
    return [_ids(rng, case, shape=(B, F_FEATURES, P)), _labels(rng, case)]


def _features_build():
    import haiku as hk
    import jax
    import jax.numpy as jnp

    def net(ids):
        offsets = jnp.arange(F_FEATURES, dtype=ids.dtype) * N
        pooled = hk.Embed(F_FEATURES * N, D)(ids + offsets[None, :, None]).sum(2)
        return hk.Linear(1)(pooled.reshape(ids.shape[0], -1))

    fwd = hk.without_apply_rng(hk.transform(net))
    ids, y = _features_inputs("random", np.random.default_rng(0))
    params = fwd.init(jax.random.key(9), ids)
    tx = _optax("sgd")

    return _squared_error_step(fwd.apply, params, tx, ids, y)


reg(TrainStep("haiku_embed_feature_offsets_sgd", "haiku", "sgd", "jax", ("padded_bag",),
              ("sgd",), _features_build, _features_inputs, donate=(0,),
              notes="ids [B,F,P] plus per-feature offsets into one hk.Embed, summed over P "
                    "(batched-bags: one padded bag of B*F bags); the gradient's scatter reads "
                    "the same [B,F,P] ids and fuses with SGD; params donated"))


# ---------------------------------------------------------------------------------------
# penzai-style named-axis lookup: the table vmapped over its columns (rows D-first), then
# unwrapped to [B,P,D] and averaged over P; optax Adagrad
# ---------------------------------------------------------------------------------------

def _columns_build():
    import jax
    import jax.numpy as jnp

    def apply(p, ids):
        cols = jax.vmap(lambda c: c[ids], in_axes=1, out_axes=0)(p["table"])   # [D,B,P]
        pooled = jnp.transpose(cols, (1, 2, 0)).mean(1)                         # unwrap, mean
        return pooled @ p["w"]

    rng = np.random.default_rng(0)
    params = {"table": rng.standard_normal((N, D)).astype(np.float32),
              "w": rng.standard_normal((D, 1)).astype(np.float32)}
    return _squared_error_step(apply, params, _optax("adagrad"), *_bag_inputs("random", rng))


reg(TrainStep("jax_vmap_table_columns_mean_adagrad", "jax", "adagrad", "jax", ("padded_bag",),
              ("adagrad",), _columns_build, _bag_inputs, donate=(0,),
              notes="penzai's named-axis lookup form: vmap over the table's columns gathers "
                    "[D,B,P] from transpose(T) and unwrap transposes it back "
                    "(transposed-table: a row gather, the transposes cancelled); its gradient "
                    "scatters [D,B,P] windows into a [D,N] zero buffer transposed back, "
                    "a row scatter after transposed-table, fused with Adagrad; params donated"))

