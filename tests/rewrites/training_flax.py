"""Training steps written with flax (linen: nn.Embed bag sum + optax SGD, Adagrad, Adam,
AdamW, donated, bf16; nnx: nnx.Embed bag mean + Adagrad) and jraph message passing over a
flax node embedding, registered into the corpus (training_corpus.STEPS)."""

from __future__ import annotations

import numpy as np
from training_corpus import (
    LR,
    B,
    D,
    E,
    N,
    P,
    TrainStep,
    V,
    _bag_inputs,
    _ids,
    _jax_step,
    _labels,
    _optax,
    _squared_error_step,
    reg,
)

# ---------------------------------------------------------------------------------------
# flax linen: nn.Embed bag sum -> Dense -> squared error; optax SGD, Adagrad, Adam
# ---------------------------------------------------------------------------------------

def _flax_linen_build(opt):
    """``opt``: an optax optimizer's name (training_corpus._optax), or a function of the
    params making the optax transformation."""
    def build():
        import flax.linen as nn
        import jax

        class BagRegressor(nn.Module):
            @nn.compact
            def __call__(self, ids):
                return nn.Dense(1)(nn.Embed(N, D)(ids).sum(1))

        model = BagRegressor()
        ids, y = _bag_inputs("random", np.random.default_rng(0))
        params = model.init(jax.random.key(0), ids)
        tx = opt(params) if callable(opt) else _optax(opt)

        return _squared_error_step(model.apply, params, tx, ids, y)
    return build


for _opt, _bwd in (("sgd", "sgd"), ("adagrad", "adagrad"), ("adam", None), ("adamw", None)):
    reg(TrainStep(f"flax_linen_bag_sum_{_opt}", "flax", _opt, "jax", ("padded_bag",),
                  (_bwd,), _flax_linen_build(_opt), _bag_inputs,
                  refusal="" if _bwd else "update of a row without gradient is not the identity",
                  notes="nn.Embed is jnp.take (fill mode) inside jit(_take); the transpose "
                        "call holds the zero broadcast and the scatter-add"
                        + {"adam": "; Adam moves rows without gradient: not fusable",
                           "adamw": "; AdamW's weight decay moves rows without gradient: "
                                    "not fusable"}.get(_opt, "")))

reg(TrainStep("flax_linen_bag_sum_sgd_donated", "flax", "sgd", "jax", ("padded_bag",),
              ("sgd",), _flax_linen_build("sgd"), _bag_inputs, donate=(0, 1),
              notes="params and optimizer state donated: input_output_alias on the entry"))


def _flax_bf16_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class Bf16Bags(nn.Module):
        @nn.compact
        def __call__(self, ids):
            rows = nn.Embed(N, D, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)(ids)
            return nn.Dense(1)(rows.sum(1).astype(jnp.float32))

    model = Bf16Bags()
    ids, y = _bag_inputs("random", np.random.default_rng(0))
    params = model.init(jax.random.key(4), ids)
    tx = _optax("sgd")

    return _squared_error_step(model.apply, params, tx, ids, y)


reg(TrainStep("flax_linen_bf16_bag_sum_sgd", "flax", "sgd", "jax", ("padded_bag",), (None,),
              _flax_bf16_build, _bag_inputs, refusal="take f32 tables only",
              notes="bf16 table (param_dtype): bf16 bag sum, bf16 gradient and update; the "
                    "gradient is rewritten (a bf16 ember.scatter_grad), its SGD stays in XLA "
                    "(the fused update kernels are f32 only)"))


# ---------------------------------------------------------------------------------------
# flax linen + optax: rowwise Adagrad as an optax transformation on the embedding (optax.
# multi_transform; SGD on the head), tables large enough for YNNPACK's row-wise mean
# ---------------------------------------------------------------------------------------

N_RW, D_RW, B_RW, P_RW = 256, 32, 128, 32


def _rowwise_bag_inputs(case, rng):
    return [_ids(rng, case, shape=(B_RW, P_RW), n=N_RW),
            rng.standard_normal((B_RW, 1)).astype(np.float32)]


def _flax_rowwise_build():
    import flax.linen as nn
    import jax
    import optax
    from training_steps import optax_rowwise_adagrad

    class BagRegressor(nn.Module):
        @nn.compact
        def __call__(self, ids):
            return nn.Dense(1)(nn.Embed(N_RW, D_RW)(ids).sum(1))

    model = BagRegressor()
    ids, y = _rowwise_bag_inputs("random", np.random.default_rng(0))
    params = model.init(jax.random.key(5), ids)
    labels = jax.tree_util.tree_map_with_path(
        lambda path, _: "embed" if "Embed" in jax.tree_util.keystr(path) else "head", params)
    tx = optax.multi_transform({"embed": optax_rowwise_adagrad(LR), "head": optax.sgd(LR)},
                               labels)

    return _squared_error_step(model.apply, params, tx, ids, y)


reg(TrainStep("flax_linen_bag_sum_optax_rowwise_adagrad", "flax", "rowwise_adagrad", "jax",
              ("padded_bag",), ("rowwise_adagrad",), _flax_rowwise_build, _rowwise_bag_inputs,
              donate=(0, 1),
              notes="rowwise Adagrad written as an optax GradientTransformation on nn.Embed's "
                    "[256, 32] table (optax.multi_transform, SGD on the head): its update "
                    "-lr * g / (sqrt(a) + eps) is added by optax.apply_updates; fused in place"))


# ---------------------------------------------------------------------------------------
# flax nnx: nnx.Embed mean over the bag, split/merge functional step, optax Adagrad
# ---------------------------------------------------------------------------------------

def _nnx_build():
    from flax import nnx

    class BagMean(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(N, D, rngs=rngs)
            self.head = nnx.Linear(D, 1, rngs=rngs)

        def __call__(self, ids):
            return self.head(self.embed(ids).mean(1))

    graphdef, state = nnx.split(BagMean(nnx.Rngs(0)))   # nnx.State: a pytree jax.jit takes
    tx = _optax("adagrad")

    def loss(state, ids, y):
        return ((nnx.merge(graphdef, state)(ids) - y) ** 2).mean()

    ids, y = _bag_inputs("random", np.random.default_rng(0))
    return _jax_step(loss, tx), [state, tx.init(state), ids, y]


reg(TrainStep("flax_nnx_bag_mean_adagrad", "flax", "adagrad", "jax", ("padded_bag",),
              ("adagrad",), _nnx_build, _bag_inputs,
              notes="nnx.split/merge functional step; mean pooling scales the cotangent"))


# ---------------------------------------------------------------------------------------
# jraph: GraphConvolution (message passing, symmetric normalisation) over embedded nodes
# ---------------------------------------------------------------------------------------

def _graph_inputs(case, rng):
    s, r = rng.integers(0, V, E), rng.integers(0, V, E)
    if case != "random":
        r[r == 1] = 0                                     # node 1 receives nothing
        s[:2] = s[2]                                      # duplicate senders
    node_ids = rng.integers(0, N, V)
    if case == "oob":
        node_ids[:2] = [N + 1, -N - 1]                    # OOB node ids (jnp.take fills)
    return [node_ids.astype(np.int32), s.astype(np.int32), r.astype(np.int32),
            rng.standard_normal((V, 1)).astype(np.float32)]


def _jraph_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import jraph

    class GCN(nn.Module):
        @nn.compact
        def __call__(self, node_ids, senders, receivers):
            x = nn.Embed(N, D)(node_ids)
            g = jraph.GraphsTuple(nodes=x, edges=None, senders=senders, receivers=receivers,
                                  n_node=jnp.array([V]), n_edge=jnp.array([E]), globals=None)
            conv = jraph.GraphConvolution(update_node_fn=nn.Dense(D), add_self_edges=False,
                                          symmetric_normalization=True)
            return nn.Dense(1)(conv(g).nodes)

    model = GCN()
    node_ids, s, r, y = _graph_inputs("random", np.random.default_rng(0))
    params = model.init(jax.random.key(3), node_ids, s, r)
    tx = _optax("sgd")

    return _squared_error_step(model.apply, params, tx, node_ids, s, r, y)


reg(TrainStep("jraph_gcn_node_embed_sgd", "jraph", "sgd", "jax", ("segment_reduce",),
              ("sgd", None), _jraph_build, _graph_inputs, refusal="stays in XLA",
              notes="message passing: segment_sum over receivers of the normalised node "
                    "features gathered by sender (a computed [V, D] table); its transpose "
                    "is a gradient of that computed table (no optimizer); the node "
                    "embedding's lookup has no pooling, its gradient feeds SGD; degree "
                    "counting (segment_sum of ones) is a zero-initialised scatter-add that "
                    "is not an embedding gradient"))



# ---------------------------------------------------------------------------------------
# flax: nn.vmap over a stack of nn.Embed (one table per feature, params [F,N,D]), Adagrad
# ---------------------------------------------------------------------------------------

F_STACK = 3


def _stacked_inputs(case, rng):
    return [_ids(rng, case, shape=(F_STACK, B, P)), _labels(rng, case)]


def _stacked_build():
    import flax.linen as nn
    import jax

    class Stacked(nn.Module):
        @nn.compact
        def __call__(self, ids):                          # ids [F, B, P]
            emb = nn.vmap(nn.Embed, variable_axes={"params": 0},
                          split_rngs={"params": True}, in_axes=0)(N, D)
            pooled = emb(ids).sum(2).transpose(1, 0, 2).reshape(ids.shape[1], -1)
            return nn.Dense(1)(pooled)

    model = Stacked()
    ids, y = _stacked_inputs("random", np.random.default_rng(0))
    params = model.init(jax.random.key(8), ids)
    tx = _optax("adagrad")

    return _squared_error_step(model.apply, params, tx, ids, y)


reg(TrainStep("flax_vmap_stacked_embed_adagrad", "flax", "adagrad", "jax", ("padded_bag",),
              ("adagrad",), _stacked_build, _stacked_inputs,
              notes="nn.vmap(nn.Embed) over a [F,N,D] stack (jnp.take, fill mode): the lookup "
                    "and its scatter-add transpose have batching dims; stacked-tables makes "
                    "both flat [F*N,D] and moves the Adagrad update onto the flat gradient, "
                    "which fuses"))
