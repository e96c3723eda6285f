"""The claim behind refusing Keras SGD's sparse apply (patterns/sparse_apply.py): under
``jit_compile=True`` a ``scatter_sub`` of IndexedSlices into a variable subtracts a duplicate
id's updates one after the other, bit for bit, which is not what a fused sparse SGD (sum the
row's gradients, then one fused multiply-add) computes. And a step that scatters into the
variable is reported as one backward near-miss with that reason, the module left as it is."""

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


def test_scatter_into_the_variable_is_a_backward_near_miss():
    from ember_xla.hlo_import.tf_source import from_tf_function
    from ember_xla.rewrites.patterns.sparse_apply import SGD_REASON
    from ember_xla.rewrites.pipeline import rewrite_module

    t0, ids, g = _inputs()

    v = tf.Variable(t0)

    @tf.function(jit_compile=True)
    def step(ids, g):
        rows = tf.gather(v, ids)                                   # the lookup
        v.scatter_sub(tf.IndexedSlices(rows * g * LR, ids))
        return tf.identity(v)

    model = from_tf_function(step, ids, g, source="scatter_sub")
    r = rewrite_module(model.module)
    (miss,) = [n for n in r.near_misses if n.get("pass") == "backward"]
    assert miss["reason"] == SGD_REASON and not r.clusters
    assert r.module is model.module                                 # nothing rewritten
