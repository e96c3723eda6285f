"""TF/Keras sparse applies (patterns/sparse_apply.py): under ``jit_compile=True`` a
``scatter_sub`` of IndexedSlices into a variable subtracts a duplicate id's updates one after
the other, bit for bit (not what a fused sparse SGD -- sum the row's gradients, then one fused
multiply-add -- computes), and the rewrite makes it an in-place ``ember.ordered_scatter`` whose
result equals XLA's under both excess-precision settings: duplicate ids, ids past either end
(the exported step run on XLA:CPU with them: the lookup clamps them, the scatter drops them),
zero learning rate, an empty batch, a variable the caller keeps
(no aliasing: the kernel copies it first). Bad operands of the call give one clear error."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

LR = np.float32(0.1)


def _apply(t0: np.ndarray, ids: np.ndarray, g: np.ndarray):
    v = tf.Variable(t0)

    @tf.function(jit_compile=True)
    def step(ids, g):
        v.scatter_sub(tf.IndexedSlices(g * LR, ids))
        return tf.identity(v)

    return step, step(ids, g).numpy()


def _inputs():
    rng = np.random.default_rng(0)
    t0 = rng.standard_normal((20, 8)).astype(np.float32)
    ids = np.array([3, 3, 3, 5, 3, 7, 7, 0], np.int32)          # duplicates
    return t0, ids, rng.standard_normal((8, 8)).astype(np.float32)


def test_keras_scatter_sub_is_the_in_order_subtract_not_a_fused_sgd():
    t0, ids, g = _inputs()
    _, got = _apply(t0, ids, g)
    seq = t0.copy()
    for j, i in enumerate(ids):
        seq[i] = seq[i] - g[j] * LR
    assert seq.tobytes() == got.tobytes()
    summed = np.zeros_like(t0)
    for j, i in enumerate(ids):
        summed[i] += g[j]
    fused = t0.copy()
    for i in set(ids.tolist()):  # fma(sum, -lr, t): one rounding, exact in float64 here
        fused[i] = (t0[i].astype(np.float64) - np.float64(LR) * summed[i]).astype(np.float32)
    assert fused.tobytes() != got.tobytes()


def _export(t0, ids, g, lr=LR):
    from ember_xla.hlo_import.tf_source import from_tf_function

    v = tf.Variable(t0)

    @tf.function(jit_compile=True)
    def step(ids, g):
        rows = tf.gather(v, ids)                                   # the lookup
        v.scatter_sub(tf.IndexedSlices(rows * g * lr, ids))
        return tf.identity(v)

    return from_tf_function(step, ids, g, source="scatter_sub")


def _check(model, ids, g):
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    r = rewrite_module(model.module)
    bound = [np.asarray(model.bound[k]) for k in sorted(model.bound)]
    n = len(model.module.entry.params())
    args = ([ids, g] if n == 2 + len(bound) else []) + bound  # TF folds an empty apply away
    for ex in (True, False):
        opts = {"xla_allow_excess_precision": ex}
        want, got = run_module(model.module, args, opts), run_module(r.module, args, opts)
        assert [a.tobytes() for a in got] == [a.tobytes() for a in want], opts
    return r


@pytest.mark.parametrize("lr,out_of_range", [(LR, False), (np.float32(0.0), False),
                                              (LR, True)])
def test_scatter_into_the_variable_becomes_an_in_place_ordered_scatter(lr, out_of_range):
    t0, ids, g = _inputs()
    model = _export(t0, ids, g, lr)
    if out_of_range:
        ids = np.array([3, 20, 3, -1, 23, 7, -20, 19], np.int32)
    r = _check(model, ids, g)
    (e,) = [c for c in r.clusters if c["pass"] == "backward"]
    assert e["kind"] == "ordered_scatter" and e["optimizer"] == "sgd"
    (cc,) = [op for op in r.module.entry.ops
             if op.attributes.get("custom_call_target") == "ember.ordered_scatter"]
    # a TF variable's buffer may alias the result: the call updates it in place
    assert cc.attributes["output_operand_aliasing"] == [
        {"output_shape_index": [], "operand_index": 0, "operand_shape_index": []}]


def test_many_duplicates_of_one_row():
    rng = np.random.default_rng(3)
    t0 = rng.standard_normal((20, 8)).astype(np.float32)
    ids = np.concatenate([np.full(300, 4), rng.integers(0, 20, 700)]).astype(np.int32)
    g = (rng.standard_normal((1000, 8)) * np.exp(rng.uniform(-8, 8, (1000, 1)))).astype(
        np.float32)
    r = _check(_export(t0, ids, g), ids, g)
    assert [c["kind"] for c in r.clusters] == ["ordered_scatter"]


def test_empty_batch():
    t0, _, _ = _inputs()
    ids, g = np.zeros((0,), np.int32), np.zeros((0, 8), np.float32)
    r = _check(_export(t0, ids, g), ids, g)
    assert not r.clusters  # nothing left to apply (ember.ordered_scatter's own empty batch:
    #                        tests/native/test_ordered_scatter.py)


def test_single_id_keras_embedding_sgd_is_a_sparse_apply():
    """Keras ``Embedding`` of one id per sample ([B,1] ids, Flatten) trained with SGD: the
    sparse gradient reads the ids reshaped to [B], the gather (after canonicalization) another
    reshape chain of them; the scatter is still the sparse apply (an ordered scatter with the
    cost model off, a near-miss with its reason with it on), never a silent miss."""
    import keras

    from ember_xla.hlo_import.tf_source import from_tf_function
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    keras.utils.set_random_seed(0)
    inp = keras.Input((1,), dtype="int32")
    flat = keras.layers.Flatten()(keras.layers.Embedding(300, 8)(inp))
    model = keras.Model(inp, keras.layers.Dense(1)(flat))
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)

    @tf.function(jit_compile=True)
    def step(ids, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(ids) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    rng = np.random.default_rng(1)
    ids = rng.integers(0, 300, (32, 1)).astype(np.int32)
    y = rng.standard_normal((32, 1)).astype(np.float32)
    m = from_tf_function(step, ids, y)
    r = rewrite_module(m.module, cost_model=False)
    assert [(c["kind"], c["pass"]) for c in r.clusters] == [("ordered_scatter", "backward")]
    bound = [np.asarray(m.bound[k]) for k in sorted(m.bound)]
    args = [ids, y] + bound
    assert [a.tobytes() for a in run_module(r.module, args)] == \
        [a.tobytes() for a in run_module(m.module, args)]
    kept = rewrite_module(m.module)
    assert kept.clusters or any(n.get("pass") == "backward" for n in kept.near_misses)
