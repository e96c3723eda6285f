"""Corpus of training steps as real libraries write them: flax linen + optax (SGD, Adagrad,
Adam), flax nnx, haiku, equinox, jraph message passing, a token-embedding language model and
Keras 3 on TensorFlow (GradientTape + Keras SGD/Adagrad, ``jit_compile=True``). Each JAX step is
``jax.jit(train_step)`` of ``value_and_grad`` + the optimizer's update, exported with
``lower().compiler_ir("hlo")`` (with ``donate_argnums`` where the step says so); each TF step
goes through ember's TF import path (``from_tf_function``).

Every step records the clusters it must yield: ``forward`` (the cluster kinds of the lookups
followed by a reduction) and ``backward`` (one entry per table gradient: the optimizer whose
update consumes it, or None where the update touches rows without gradient and stays in XLA).
tests/rewrites/test_training_models.py checks the forward half and the equivalence of the
rewritten step; the backward record is what the backward matcher is held to.

``export(name)`` gives (ember Model, example entry inputs); ``inputs(name, case)`` gives entry
inputs for "random", "edge" (duplicate and negative ids, empty and zero-weight bags) or
"oob" (ids out of range as well). Exports are cached
per process. Importing this module imports no framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

B, P, N, D = 4, 6, 20, 8      # bags, bag length, table rows, row width
T, V_LM = 5, 24               # sequence length and vocabulary of the language-model step
V, E = 7, 16                  # graph nodes, edges
LR = 0.1

# XLA:CPU fuses the weight multiply into its bag reduce and the fused loop rounds differently
# from the in-order kernel (the kernel's sums match an in-order float32 numpy loop more
# closely); the loss then differs by f32 rounding and so do the gradients computed from it.
# The same tolerance as the inference corpus's reductions (library_models.TOL_REDUCE).
TOL_WEIGHTED_BAG = 1e-5
# The pooled [B, 2D] rows of the two-table step are bit-identical, but XLA:CPU computes the
# read-out dot [B, 2D] x [2D, 1] with another order of additions when its operand is the
# concatenate of the custom calls than when it is XLA's own scatters (measured: the
# prediction differs by 1.2e-7, the loss happens to agree); the gradients then differ by
# rounding.
TOL_READOUT_DOT = 1e-5


@dataclass(frozen=True)
class TrainStep:
    name: str
    library: str
    optimizer: str                    # sgd | adagrad | rowwise_adagrad | adam
    framework: str                    # jax | tf
    forward: tuple[str, ...]          # expected forward cluster kinds
    backward: tuple[str | None, ...]  # per table gradient: fusable optimizer, or None
    build: Callable                   # () -> (step fn, example args)
    make_inputs: Callable             # (case, rng) -> user (non-parameter) inputs
    donate: tuple[int, ...] = ()      # donate_argnums of the JAX step
    tolerance: float = 0.0            # 0: outputs bit-identical to XLA:CPU
    notes: str = ""


STEPS: dict[str, TrainStep] = {}


def _reg(s: TrainStep) -> None:
    assert s.name not in STEPS
    STEPS[s.name] = s


def _ids(rng, case, shape=(B, P), n=N):
    """"edge": duplicates (within and across bags) and negative ids that wrap into range;
    "oob": also ids past either end (jnp.take fills NaN rows, XLA's gather clamps)."""
    ids = rng.integers(0, n, size=shape)
    if case in ("edge", "oob"):
        flat = ids.reshape(-1)
        flat[:7] = [-1, n - 1, -n, 0, 0, n - 1, -1]
        if case == "oob":
            flat[7:10] = [n, n + 3, -n - 1]
        ids = flat.reshape(shape)
        if len(shape) == 2:
            ids[1, :] = ids[1, 0]                         # one row repeated in a bag
    return ids.astype(np.int32)


def _labels(rng, case):
    return rng.standard_normal((B, 1)).astype(np.float32)


def _bag_inputs(case, rng):
    return [_ids(rng, case), _labels(rng, case)]


def _optax(kind: str):
    import optax

    return {"sgd": lambda: optax.sgd(LR), "adagrad": lambda: optax.adagrad(LR),
            "adam": lambda: optax.adam(LR)}[kind]()


def _jax_step(loss_fn, tx):
    """``value_and_grad`` of ``loss_fn(params, *batch)`` + the optax update."""
    import jax
    import optax

    def train_step(params, opt_state, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


# ---------------------------------------------------------------------------------------
# flax linen: nn.Embed bag sum -> Dense -> squared error; optax SGD, Adagrad, Adam
# ---------------------------------------------------------------------------------------

def _flax_linen_build(opt: str):
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
        tx = _optax(opt)

        def loss(p, ids, y):
            return ((model.apply(p, ids) - y) ** 2).mean()

        return _jax_step(loss, tx), [params, tx.init(params), ids, y]
    return build


for _opt, _bwd in (("sgd", "sgd"), ("adagrad", "adagrad"), ("adam", None)):
    _reg(TrainStep(f"flax_linen_bag_sum_{_opt}", "flax", _opt, "jax", ("padded_bag",),
                   (_bwd,), _flax_linen_build(_opt), _bag_inputs,
                   notes="nn.Embed is jnp.take (fill mode) inside jit(_take); the transpose "
                         "call holds the zero broadcast and the scatter-add"
                         + ("; Adam moves rows without gradient: not fusable" if _bwd is None
                            else "")))

_reg(TrainStep("flax_linen_bag_sum_sgd_donated", "flax", "sgd", "jax", ("padded_bag",),
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

    def loss(p, ids, y):
        return ((model.apply(p, ids) - y) ** 2).mean()

    return _jax_step(loss, tx), [params, tx.init(params), ids, y]


_reg(TrainStep("flax_linen_bf16_bag_sum_sgd", "flax", "sgd", "jax", ("padded_bag",), ("sgd",),
               _flax_bf16_build, _bag_inputs,
               notes="bf16 table (param_dtype): bf16 bag sum, bf16 gradient and update"))


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

_reg(TrainStep("jnp_take_two_tables_rowwise_adagrad", "jax.numpy", "rowwise_adagrad", "jax",
               ("segment_reduce", "segment_reduce"), ("rowwise_adagrad", "rowwise_adagrad"),
               _two_tables_build, _two_table_inputs, donate=(0, 1), tolerance=TOL_READOUT_DOT,
               notes="jnp.take (fill mode) under value_and_grad: jvp_jit__take__ returns the "
                     "rows and the indices; the transposes are transpose_jvp_jit__take___ "
                     "calls; rowwise Adagrad written by hand, initial accumulator 0.1; "
                     "tables and accumulators donated"))


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


_reg(TrainStep("flax_nnx_bag_mean_adagrad", "flax", "adagrad", "jax", ("padded_bag",),
               ("adagrad",), _nnx_build, _bag_inputs,
               notes="nnx.split/merge functional step; mean pooling scales the cotangent"))


# ---------------------------------------------------------------------------------------
# haiku: hk.Embed (table[ids]: an inline clamped gather) + segment_sum of flat lookups, SGD
# ---------------------------------------------------------------------------------------

def _segments(rng, case):
    seg = np.sort(rng.integers(0, B, size=E))
    if case != "random":
        seg[seg == 2] = 1                                 # bag 2 empty
    return seg.astype(np.int32)


def _seg_inputs(case, rng):
    return [_ids(rng, case, shape=(E,)), _segments(rng, case), _labels(rng, case)]


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

    def loss(p, ids, seg, y):
        return ((fwd.apply(p, ids, seg) - y) ** 2).mean()

    return _jax_step(loss, tx), [params, tx.init(params), ids, seg, y]


_reg(TrainStep("haiku_embed_segment_sum_sgd", "haiku", "sgd", "jax", ("segment_reduce",),
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


_reg(TrainStep("equinox_embedding_weighted_bag_adagrad", "equinox", "adagrad", "jax",
               ("padded_bag",), ("adagrad",), _eqx_build, _weighted_inputs,
               tolerance=TOL_WEIGHTED_BAG,
               notes="vmap of eqx.nn.Embedding (dynamic-slice rows -> gather); per-lookup "
                     "weights: the transpose multiplies the broadcast cotangent by them"))


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

    def loss(p, node_ids, s, r, y):
        return ((model.apply(p, node_ids, s, r) - y) ** 2).mean()

    return _jax_step(loss, tx), [params, tx.init(params), node_ids, s, r, y]


_reg(TrainStep("jraph_gcn_node_embed_sgd", "jraph", "sgd", "jax", ("segment_reduce",),
               ("sgd", None), _jraph_build, _graph_inputs,
               notes="message passing: segment_sum over receivers of the normalised node "
                     "features gathered by sender (a computed [V, D] table); its transpose "
                     "is a gradient of that computed table (no optimizer); the node "
                     "embedding's lookup has no pooling, its gradient feeds SGD; degree "
                     "counting (segment_sum of ones) is a zero-initialised scatter-add that "
                     "is not an embedding gradient"))


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


_reg(TrainStep("lm_token_embedding_tied_sgd", "optax", "sgd", "jax", (), (None,),
               _lm_build, _lm_inputs, donate=(0,),
               notes="a lookup without reduction is no forward cluster; the tied table also "
                     "gets a dense gradient from the logits, so its update is not sparse; "
                     "the integer-label cross-entropy's take_along_axis transposes to a "
                     "zero-initialised scatter-add over [B, T, V] that is not a table gradient"))


# ---------------------------------------------------------------------------------------
# Keras 3 on TensorFlow: Embedding + GlobalAveragePooling1D + Dense, GradientTape, Keras
# SGD / Adagrad applying the IndexedSlices gradient as a scatter into the variable
# ---------------------------------------------------------------------------------------

def _keras_build(opt: str):
    def build():
        import keras
        import tensorflow as tf

        inp = keras.Input((P,), dtype="int32")
        x = keras.layers.Embedding(N, D, embeddings_initializer=keras.initializers.RandomNormal(
            seed=1))(inp)
        out = keras.layers.Dense(1, kernel_initializer=keras.initializers.RandomNormal(seed=2))(
            keras.layers.GlobalAveragePooling1D()(x))
        model = keras.Model(inp, out)
        optimizer = {"sgd": keras.optimizers.SGD, "adagrad": keras.optimizers.Adagrad}[opt](LR)
        optimizer.build(model.trainable_variables)

        @tf.function(jit_compile=True)
        def train_step(ids, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(ids) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        ids, y = _keras_inputs("random", np.random.default_rng(0))
        return train_step, [ids, y]
    return build


def _keras_inputs(case, rng):
    ids = np.clip(_ids(rng, case), 0, N - 1)          # tf.gather on CPU rejects OOB ids
    return [ids.astype(np.int32), _labels(rng, case)]


for _opt in ("sgd", "adagrad"):
    _reg(TrainStep(f"keras_embedding_average_{_opt}", "keras", _opt, "tf", ("padded_bag",),
                   (_opt,), _keras_build(_opt), _keras_inputs,
                   notes="tf.gather's gradient is IndexedSlices; the Keras optimizer applies it "
                         "as an XLA scatter straight into the variable (no zero buffer)"))


# ---------------------------------------------------------------------------------------
# export and inputs
# ---------------------------------------------------------------------------------------

def _flat(x) -> list[np.ndarray]:
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(x)]


@functools.cache
def _built(name: str):
    return STEPS[name].build()


@functools.cache
def export(name: str):
    """(ember Model, example entry inputs) of step ``name``, exported through its real path."""
    s = STEPS[name]
    fn, example = _built(name)
    if s.framework == "tf":
        from ember_xla.hlo_import.tf_source import from_tf_function

        model = from_tf_function(fn, *example, source=name)
        return model, [np.asarray(a) for a in example] + [
            np.asarray(model.bound[k]) for k in sorted(model.bound)]
    import jax

    from ember_xla.hlo_import.model import Model
    from ember_xla.hlo_import.proto import module_from_proto

    lowered = jax.jit(fn, donate_argnums=s.donate).lower(*example)
    proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    model = Model(module_from_proto(proto, f"jax:{name}"), f"jax:{name}")
    return model, [a for x in example for a in _flat(x)]


def inputs(name: str, case: str, seed: int = 0) -> list[np.ndarray]:
    """Entry inputs: the step's parameters and optimizer state (as exported) and fresh user
    inputs for ``case`` ("random", "edge" or "oob")."""
    s = STEPS[name]
    user = [np.asarray(u) for u in s.make_inputs(case, np.random.default_rng(seed))]
    model, example = export(name)
    if s.framework == "tf":
        return user + example[len(user):]
    return example[:len(example) - len(user)] + user
