"""Corpus of embedding idioms as real libraries write them (flax, haiku, equinox, Keras 3,
keras-rs, jraph, TensorFlow, jax.numpy), exported through ember's own import path
(``from_jax`` / ``from_tf_function``). Each model names the canonicalization idioms it
exercises; tests/rewrites/test_library_models.py checks that they are found and that the
rewritten module equals the original on XLA:CPU for random and edge inputs.

The libraries are pinned in pyproject's ``test`` extra (all install beside jax 0.10.2 /
tensorflow-cpu 2.21.0). Exports are cached per process (``export``), so a session builds each
model once. Importing this module imports no framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

B, P, N, D = 4, 6, 20, 8      # bags, bag length, table rows, row width
V, E = 7, 16                  # graph nodes, edges

# every model is compared bit for bit (NaN payloads aside): the kernels add a bag's rows in
# XLA:CPU's order (native/padded_order.py), scaled rows included; a model may state a tolerance
# where XLA's order is not reproduced, with the reason in its notes
TOL_REDUCE = 0.0


@dataclass(frozen=True)
class LibModel:
    name: str
    library: str
    idioms: tuple[str, ...]   # canonicalization idioms it exercises (docs/IDIOMS.md)
    framework: str            # jax | tf
    clusters: int
    tolerance: float
    build: Callable           # () -> (fn, example user inputs)
    make_inputs: Callable     # (case, rng) -> user inputs
    assume_finite_tables: bool = False
    notes: str = ""
    near_misses: int = 0      # reductions that are not embedding ops (a softmax's max), reported


MODELS: dict[str, LibModel] = {}


def _reg(m: LibModel) -> None:
    assert m.name not in MODELS
    MODELS[m.name] = m


def _ids(rng, case, shape=(B, P), n=N):
    ids = rng.integers(0, n, size=shape)
    if case == "edge":
        flat = ids.reshape(-1)
        flat[:7] = [-1, n, n + 3, -n, -n - 1, 0, 0]      # OOB, negative, duplicates
        ids = flat.reshape(shape)
        if len(shape) == 2:
            ids[1, :] = ids[1, 0]                         # duplicates within a bag
    return ids.astype(np.int32)


def _mask(rng, case):
    m = rng.random((B, P)) < 0.7
    m[:, 0] = True
    if case == "edge":
        m[2, :] = False                                   # an empty (all-masked) bag
    return m


def _edges(rng, case):
    s, r = rng.integers(0, V, E), rng.integers(0, V, E)
    if case == "edge":
        s[:3] = [-1, V, V + 2]                            # OOB senders (take clamps/fills)
        r[r == 1] = 0                                     # node 1 receives nothing
        r[3] = V                                          # dropped by the segment op
    return s.astype(np.int32), r.astype(np.int32)


# ---------------------------------------------------------------------------------------
# flax: nn.Embed under jax.vmap, scaled by sqrt(D) (transformer-style), bag sum per example
# ---------------------------------------------------------------------------------------

def _flax_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    emb = nn.Embed(N, D)
    params = emb.init(jax.random.key(0), jnp.zeros((P,), jnp.int32))

    def f(params, ids):
        def one(x):  # one example: [P] ids -> [D]
            return (emb.apply(params, x) * jnp.sqrt(float(D))).sum(0)
        return jax.vmap(one)(ids)

    return f, [params, _ids(np.random.default_rng(0), "random")]


_reg(LibModel("flax_embed_vmap_scaled_bag_sum", "flax", ("vmap", "scalar-scale"), "jax", 1,
              TOL_REDUCE, _flax_build, lambda case, rng: [_ids(rng, case)],
              notes="flax.linen.Embed (jnp.take, fill mode) * sqrt(D), .sum(0) under vmap"))


# ---------------------------------------------------------------------------------------
# flax mixed precision: nn.Embed(dtype=bfloat16) over f32 parameters, mean of a [B, P] bag
# ---------------------------------------------------------------------------------------

def _flax_bf16_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    emb = nn.Embed(N, D, dtype=jnp.bfloat16)  # param_dtype stays f32
    params = emb.init(jax.random.key(0), jnp.zeros((B, P), jnp.int32))

    def f(params, ids):
        return emb.apply(params, ids).mean(1)

    return f, [params, _ids(np.random.default_rng(0), "random")]


_reg(LibModel("flax_embed_bf16_compute_bag_mean", "flax", ("rows-as-bf16",), "jax", 1,
              TOL_REDUCE, _flax_bf16_build, lambda case, rng: [_ids(rng, case)],
              notes="flax.linen.Embed(dtype=bfloat16) over f32 params: the table converted "
                    "to bf16 before jnp.take; the call reads the f32 table (row_type=bf16)"))


def _haiku_time_major_build():
    import haiku as hk
    import jax

    # time-major ids [P, B] (as recurrent models lay sequences out), bag over axis 0
    fwd = hk.without_apply_rng(hk.transform(lambda ids: hk.Embed(N, D)(ids).sum(0)))
    ids = _ids(np.random.default_rng(0), "random").T.copy()
    return fwd.apply, [fwd.init(jax.random.key(1), ids), ids]


_reg(LibModel("haiku_embed_time_major_bag_sum", "haiku", ("leading-bag-axis",), "jax", 1,
              TOL_REDUCE, _haiku_time_major_build,
              lambda case, rng: [_ids(rng, case).T.copy()],
              notes="reduce over axis 0 of [P,B,D]: the lookups are transposed onto the ids"))


def _flax_mask_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    emb = nn.Embed(N, D)
    rng = np.random.default_rng(0)
    ids, mask = _ids(rng, "random"), _mask(rng, "random")
    params = emb.init(jax.random.key(2), ids)

    def f(params, ids, mask):        # jnp.take fill-mode lookup, then a masked sum
        return jnp.where(mask[..., None], emb.apply(params, ids), 0.0).sum(1)

    return f, [params, ids, mask]


_reg(LibModel("flax_embed_where_masked_sum", "flax", ("where-mask-0",), "jax", 1, TOL_REDUCE,
              _flax_mask_build, lambda case, rng: [_ids(rng, case), _mask(rng, case)],
              notes="mask over jnp.take's fill select: the fill chain is rebuilt for the flat "
                    "ids (OOB ids give NaN rows unless masked out)"))


# ---------------------------------------------------------------------------------------
# haiku: hk.Embed(lookup_style="ONE_HOT") bag sum; hk.Embed + jnp.where(mask, rows, 0) mean
# ---------------------------------------------------------------------------------------

def _haiku_onehot_build():
    import haiku as hk
    import jax

    fwd = hk.without_apply_rng(hk.transform(
        lambda ids: hk.Embed(N, D, lookup_style="ONE_HOT")(ids).sum(1)))
    ids = _ids(np.random.default_rng(0), "random")
    return fwd.apply, [fwd.init(jax.random.key(0), ids), ids]


_reg(LibModel("haiku_embed_one_hot_bag_sum", "haiku", ("one-hot",), "jax", 1, TOL_REDUCE,
              _haiku_onehot_build, lambda case, rng: [_ids(rng, case)],
              assume_finite_tables=True,
              notes="jax.nn.one_hot(ids, N) @ table; OOB ids give zero rows"))


def _haiku_mask_build():
    import haiku as hk
    import jax
    import jax.numpy as jnp

    def net(ids, mask):
        rows = hk.Embed(N, D)(ids)                     # ARRAY_INDEX: table[ids]
        total = jnp.where(mask[..., None], rows, 0.0).sum(1)
        return total / jnp.maximum(mask.sum(1, keepdims=True), 1)

    fwd = hk.without_apply_rng(hk.transform(net))
    rng = np.random.default_rng(0)
    ids, mask = _ids(rng, "random"), _mask(rng, "random")
    return fwd.apply, [fwd.init(jax.random.key(0), ids, mask), ids, mask]


_reg(LibModel("haiku_embed_where_masked_mean", "haiku", ("where-mask-0",), "jax", 1, 0.0,
              _haiku_mask_build, lambda case, rng: [_ids(rng, case), _mask(rng, case)],
              notes="where(mask, rows, 0).sum / count: the divide stays in XLA"))


def _haiku_einsum_mask_build():
    import haiku as hk
    import jax
    import jax.numpy as jnp

    def net(ids, mask):
        rows = hk.Embed(N, D)(ids)                     # ARRAY_INDEX: table[ids]
        return jnp.einsum("bl,bld->bd", mask.astype(rows.dtype), rows)

    fwd = hk.without_apply_rng(hk.transform(net))
    rng = np.random.default_rng(0)
    ids, mask = _ids(rng, "random"), _mask(rng, "random")
    return fwd.apply, [fwd.init(jax.random.key(0), ids, mask), ids, mask]


_reg(LibModel("haiku_embed_einsum_masked_bag", "haiku", ("einsum-mask",), "jax", 1, 0.0,
              _haiku_einsum_mask_build, lambda case, rng: [_ids(rng, case), _mask(rng, case)],
              notes="einsum('bl,bld->bd', mask, rows): a dot_general over the bag axis; "
                    "XLA:CPU's dot adds row after row with FMA, the kernel's fused product"))


# ---------------------------------------------------------------------------------------
# equinox: eqx.nn.Embedding under a double vmap, where(mask, rows, -inf).max(1)
# ---------------------------------------------------------------------------------------

def _eqx_build():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    emb = eqx.nn.Embedding(N, D, key=jax.random.key(0))

    def f(emb, ids, mask):
        rows = jax.vmap(jax.vmap(emb))(ids)            # gather of [1,D] slices + squeeze
        return jnp.where(mask[..., None], rows, -jnp.inf).max(1)

    rng = np.random.default_rng(0)
    return f, [emb, _ids(rng, "random"), _mask(rng, "random")]


# 0 clusters: a masked max bag stays in XLA (XLA:CPU's YNNPACK max drops NaN, docs/RELIABILITY.md);
# the vmap squeeze is still canonicalized and the refusal reported
_reg(LibModel("equinox_embedding_vmap_masked_max", "equinox", ("vmap", "where-mask-inf"),
              "jax", 0, 0.0, _eqx_build, lambda case, rng: [_ids(rng, case), _mask(rng, case)],
              notes="vmap of a scalar lookup: start indices concatenate(i, 0), reshape squeeze"))


# ---------------------------------------------------------------------------------------
# jax.numpy: take(mode='wrap') segment sum; one gather feeding segment_sum and segment_max
# ---------------------------------------------------------------------------------------

def _take_wrap_build():
    import jax
    import jax.numpy as jnp

    def f(t, ids, seg):
        return jax.ops.segment_sum(jnp.take(t, ids, axis=0, mode="wrap"), seg, num_segments=B)

    rng = np.random.default_rng(0)
    return f, [rng.standard_normal((N, D)).astype(np.float32), _ids(rng, "random", (E,)),
               _edges(rng, "random")[1] % B]


def _take_wrap_inputs(case, rng):
    seg = _edges(rng, case)[1] % B
    if case == "edge":
        seg[:2] = [-1, B]
    return [rng.standard_normal((N, D)).astype(np.float32), _ids(rng, case, (E,)), seg]


_reg(LibModel("jnp_take_wrap_segment_sum", "jax.numpy", ("take-wrap",), "jax", 1, 0.0,
              _take_wrap_build, _take_wrap_inputs,
              notes="floor-mod stays in XLA; the kernel reads ids already in [0, N)"))


# ---------------------------------------------------------------------------------------
# jraph: GraphNetwork node update aggregating the same sent messages by sum and by max
# ---------------------------------------------------------------------------------------

def _graph(case, rng):
    x = rng.standard_normal((V, D)).astype(np.float32)
    s, r = _edges(rng, case)
    return [x, s, r]


def _jraph_build():
    import jax.numpy as jnp
    import jraph

    def sum_and_max(e, seg, n):  # a PNA-style multi-aggregator over the same messages
        return jnp.concatenate([jraph.segment_sum(e, seg, n), jraph.segment_max(e, seg, n)], 1)

    def f(x, senders, receivers):
        g = jraph.GraphsTuple(nodes=x, edges=jnp.zeros((E, 1)), senders=senders,
                              receivers=receivers, n_node=jnp.array([V]),
                              n_edge=jnp.array([E]), globals=None)
        net = jraph.GraphNetwork(
            update_edge_fn=lambda edges, sent, received, glob: sent,   # message = x[sender]
            update_node_fn=lambda nodes, sent, received, glob: received,
            update_global_fn=None, aggregate_edges_for_nodes_fn=sum_and_max)
        return net(g).nodes

    return f, _graph("random", np.random.default_rng(0))


_reg(LibModel("jraph_graph_network_sum_and_max", "jraph", ("multi-output",), "jax", 2, 0.0,
              _jraph_build, _graph,
              notes="GraphNetwork (segment_sum of nodes[senders]) plus jraph.segment_max of "
                    "the same gather: one lookup feeding two reductions"))


def _jraph_gat_build():
    import jax
    import jax.numpy as jnp
    import jraph

    def logit(sent, received, edges):  # dot-product attention over the gathered features
        return jax.nn.leaky_relu(jnp.sum(sent * received, axis=-1, keepdims=True))

    def f(x, senders, receivers):
        g = jraph.GraphsTuple(nodes=x, edges=None, senders=senders, receivers=receivers,
                              n_node=jnp.array([V]), n_edge=jnp.array([E]), globals=None)
        return jraph.GAT(lambda n: n, logit)(g).nodes

    return f, _graph("random", np.random.default_rng(0))


_reg(LibModel("jraph_gat_attention_weighted_sum", "jraph", ("shared-gather",), "jax", 2, 0.0,
              _jraph_gat_build, _graph, near_misses=0,
              notes="jraph.GAT: nodes[senders] feeds the attention logits and the messages; "
                    "the message sum reads its own copy of the lookup (split-shared-lookup), "
                    "weighted by the segment softmax, whose sum of exp(logits - max[receivers]) "
                    "is a segment sum of computed [E,1] rows (segment_sum_rows); the logits' "
                    "sum over D is within each row (row_reduction.py: no bag, no near-miss)"))


def _jraph_mean_build():
    import jraph

    def f(x, senders, receivers):  # GraphSAGE's mean aggregation of x[senders] per receiver
        return jraph.segment_mean(x[senders], receivers, num_segments=V)

    return f, _graph("random", np.random.default_rng(0))


_reg(LibModel("jraph_segment_mean_of_neighbours", "jraph", ("count-as-lookup",), "jax", 2, 0.0,
              _jraph_mean_build, _graph,
              notes="jraph.segment_mean: the segment sum of x[senders], and the count "
                    "segment_sum(ones_like(messages)) over [E, D], a segment sum of a lookup of "
                    "a row of ones (count-as-lookup); the division reads both calls' results"))


# ---------------------------------------------------------------------------------------
# Keras 3 (TF backend): Embedding(mask_zero=True) + GlobalAveragePooling1D (SelectV2 mask);
# keras-rs EmbedReduce with weights; TF one-hot einsum lookup
# ---------------------------------------------------------------------------------------

def _keras_gap_build():
    import keras

    inp = keras.Input((P,), dtype="int32")
    x = keras.layers.Embedding(N, D, mask_zero=True,
                               embeddings_initializer=keras.initializers.RandomNormal(seed=1))(inp)
    model = keras.Model(inp, keras.layers.GlobalAveragePooling1D()(x))
    return (lambda ids: model(ids)), [_ids(np.random.default_rng(0), "random")]


def _keras_ids(case, rng):
    ids = _ids(rng, case)
    ids[0, 2:] = 0                                        # padding (masked by mask_zero)
    if case == "edge":
        ids[3, :] = 0                                     # an all-padding sequence
    return [ids]


_reg(LibModel("keras_embedding_mask_zero_global_average_pooling", "keras", ("keras-mask",),
              "tf", 1, 0.0, _keras_gap_build, _keras_ids,
              notes="mask propagation: select(broadcast(ids != 0), rows, 0); the count is a "
                    "separate reduce of the mask; an all-padding row divides 0/0 = NaN"))


def _keras_mixed_build():
    import keras

    inp = keras.Input((P,), dtype="int32")
    x = keras.layers.Embedding(N, D, dtype="mixed_bfloat16",
                               embeddings_initializer=keras.initializers.RandomNormal(seed=3))(inp)
    model = keras.Model(inp, keras.layers.GlobalAveragePooling1D(dtype="mixed_bfloat16")(x))
    return (lambda ids: model(ids)), [_ids(np.random.default_rng(0), "random")]


_reg(LibModel("keras_embedding_mixed_bfloat16_global_average_pooling", "keras",
              ("rows-as-bf16",), "tf", 1, 0.0, _keras_mixed_build,
              lambda case, rng: [_ids(rng, case)],
              notes="the mixed_bfloat16 policy: f32 variables, the looked-up rows cast to bf16, "
                    "the mean computed in f32 and cast back; the call reads the rows as bf16 "
                    "(row_type=bf16) below YNNPACK's sizes"))


def _keras_rs_build():
    import keras
    import keras_rs

    layer = keras_rs.layers.EmbedReduce(N, D, combiner="sum",
                                        embeddings_initializer=keras.initializers.RandomNormal(
                                            seed=2))
    rng = np.random.default_rng(0)
    return (lambda ids, w: layer(ids, w)), [_ids(rng, "random"),
                                            rng.random((B, P)).astype(np.float32)]


_reg(LibModel("keras_rs_embed_reduce_weighted_sum", "keras-rs", ("per-row-scale",), "tf", 1,
              TOL_REDUCE, _keras_rs_build,
              lambda case, rng: [_keras_ids(case, rng)[0], rng.random((B, P)).astype(
                  np.float32)],
              notes="keras_rs.layers.EmbedReduce(combiner='sum') with per-lookup weights"))


def _tf_flat_build():
    import tensorflow as tf

    table = tf.Variable(np.random.default_rng(4).standard_normal((N, D)).astype(np.float32))

    def f(ids):                      # the TF1 idiom: look up flat ids, reshape to bags
        rows = tf.nn.embedding_lookup(table, tf.reshape(ids, [-1]))
        return tf.reduce_sum(tf.reshape(rows, [B, P, D]), axis=1)

    return f, [_ids(np.random.default_rng(0), "random")]


_reg(LibModel("tf_flat_embedding_lookup_reshape_bag_sum", "tensorflow", ("batched-reshape",),
              "tf", 1, TOL_REDUCE, _tf_flat_build, lambda case, rng: [_ids(rng, case)],
              notes="reshape([B*P,D] -> [B,P,D]) between the gather and the reduction"))


def _tf_onehot_build():
    import tensorflow as tf

    table = tf.Variable(np.random.default_rng(3).standard_normal((N, D)).astype(np.float32))

    def f(ids):
        rows = tf.einsum("bpv,vd->bpd", tf.one_hot(ids, N), table)
        return tf.reduce_sum(rows * tf.math.sqrt(float(D)), axis=1)

    return f, [_ids(np.random.default_rng(0), "random")]


_reg(LibModel("tf_one_hot_einsum_scaled_bag_sum", "tensorflow", ("one-hot", "scalar-scale"),
              "tf", 0, 0.0, _tf_onehot_build,
              lambda case, rng: [_ids(rng, case)], assume_finite_tables=True,
              notes="tf.one_hot (select(eq, 1, 0)) + einsum dot; rows * sqrt(D): XLA:CPU "
                    "adds the scaled rows with fused multiply-adds, which the segment form "
                    "(products rounded, then added) does not reproduce: kept in XLA"))


# ---------------------------------------------------------------------------------------
# flax: nn.Embed lookup of flat ids aggregated by segment_sum / count (mean) and segment_max
# ---------------------------------------------------------------------------------------

def _flax_multi_inputs(case, rng):
    return [_ids(rng, case, shape=(E,)), _edges(rng, case)[1]]


def _flax_multi_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    emb = nn.Embed(N, D)
    ids, seg = _flax_multi_inputs("random", np.random.default_rng(0))
    params = emb.init(jax.random.key(4), ids)

    def f(params, ids, seg):     # jnp.take fill-mode lookup, then mean and max per segment
        rows = emb.apply(params, ids)
        total = jax.ops.segment_sum(rows, seg, num_segments=V)
        count = jax.ops.segment_sum(jnp.ones_like(seg, jnp.float32), seg, num_segments=V)
        mean = total / jnp.maximum(count, 1.0)[:, None]
        return jnp.concatenate([mean, jax.ops.segment_max(rows, seg, num_segments=V)], 1)

    return f, [params, ids, seg]


_reg(LibModel("flax_embed_segment_mean_and_max", "flax", ("multi-output",), "jax", 2, 0.0,
              _flax_multi_build, _flax_multi_inputs,
              notes="one fill-mode gather feeding segment_sum (with a count: mean) and "
                    "segment_max: one multi_segment_reduce call; the count stays in XLA"))


# ---------------------------------------------------------------------------------------
# flax: nn.vmap over a stack of nn.Embed (one table per feature, params stacked [F,N,D])
# ---------------------------------------------------------------------------------------

F = 3   # features


def _flax_stacked_build():
    import flax.linen as nn
    import jax

    class Stacked(nn.Module):
        @nn.compact
        def __call__(self, ids):                      # ids [F, B, P] -> [B, F * D]
            emb = nn.vmap(nn.Embed, variable_axes={"params": 0},
                          split_rngs={"params": True}, in_axes=0)(N, D)
            pooled = emb(ids).sum(2)                  # [F, B, D]
            return pooled.transpose(1, 0, 2).reshape(ids.shape[1], -1)

    ids = _ids(np.random.default_rng(0), "random", shape=(F, B, P))
    model = Stacked()
    return model.apply, [model.init(jax.random.key(5), ids), ids]


_reg(LibModel("flax_vmap_stacked_embed_bag_sum", "flax", ("stacked-tables", "batched-bag"),
              "jax", 1, TOL_REDUCE, _flax_stacked_build,
              lambda case, rng: [_ids(rng, case, shape=(F, B, P))],
              notes="nn.vmap(nn.Embed): a batching-dims gather (jnp.take's fill) of stacked "
                    "tables, summed over the bag: one padded bag of F*B bags over the flat "
                    "stack"))


def _haiku_multi_feature_build():
    import haiku as hk
    import jax
    import jax.numpy as jnp

    def fwd(ids):                                     # ids [B, F, P], one table of F parts
        offsets = jnp.arange(F, dtype=ids.dtype) * N
        rows = hk.Embed(F * N, D)(ids + offsets[None, :, None])
        return rows.sum(2).reshape(ids.shape[0], -1)

    t = hk.without_apply_rng(hk.transform(fwd))
    ids = _ids(np.random.default_rng(0), "random", shape=(B, F, P))
    return t.apply, [t.init(jax.random.key(6), ids), ids]


_reg(LibModel("haiku_embed_feature_offsets_bag_sum", "haiku", ("batched-bag",), "jax", 1,
              TOL_REDUCE, _haiku_multi_feature_build,
              lambda case, rng: [_ids(rng, case, shape=(B, F, P))],
              notes="ids [B,F,P] plus per-feature offsets into one concatenated hk.Embed, "
                    "summed over P: a padded bag of B*F bags"))


def _flax_position_weighted_build():
    import flax.linen as nn
    import jax

    class PositionWeighted(nn.Module):
        @nn.compact
        def __call__(self, ids):                      # ids [B, P]
            w = self.param("position_weights", nn.initializers.ones, (ids.shape[1],))
            return (nn.Embed(N, D)(ids) * w[None, :, None]).sum(1)

    ids = _ids(np.random.default_rng(0), "random")
    model = PositionWeighted()
    params = model.init(jax.random.key(7), ids)
    params = jax.tree_util.tree_map(lambda x: x * 0.5 + 0.25, params)   # weights not all 1
    return model.apply, [params, ids]


_reg(LibModel("flax_position_weighted_bag_sum", "flax", ("position-weights",), "jax", 1,
              TOL_REDUCE, _flax_position_weighted_build, lambda case, rng: [_ids(rng, case)],
              notes="a learned weight per bag position (torchrec's PositionWeightedModule): "
                    "w[None, :, None] broadcast per lookup, a weighted padded bag"))


# ---------------------------------------------------------------------------------------
# export and inputs
# ---------------------------------------------------------------------------------------

@functools.cache
def export(name: str):
    """(ember Model, list of bound values) exported through ember's import path, cached."""
    m = MODELS[name]
    fn, example = m.build()
    if m.framework == "jax":
        from ember_xla.hlo_import.jax_source import from_jax

        return from_jax(fn, *example)
    from ember_xla.hlo_import.tf_source import from_tf_function

    return from_tf_function(fn, *example, source=name)


def _flat(x) -> list[np.ndarray]:
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(x)]


@functools.cache
def _example_params(name: str):
    m = MODELS[name]
    _, example = m.build()
    return example


def inputs(name: str, case: str, seed: int = 0) -> list[np.ndarray]:
    """Entry-parameter values: the model's parameters (as exported) and fresh user inputs."""
    m = MODELS[name]
    user = m.make_inputs(case, np.random.default_rng(seed))
    model = export(name)
    if m.framework == "jax":
        example = _example_params(name)
        n_params = len(example) - len(user)
        flat = [a for x in example[:n_params] for a in _flat(x)]
        return flat + [np.asarray(u) for u in user]
    bound = [model.bound[k] for k in sorted(model.bound)]
    return [np.asarray(u) for u in user] + [np.asarray(b) for b in bound]
