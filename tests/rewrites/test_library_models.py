"""Every idiom of the real-library corpus (tests/rewrites/library_models.py: flax, haiku,
equinox, jax.numpy, jraph, Keras 3, keras-rs, TensorFlow) is found after canonicalization
(cluster count asserted, each model's idioms listed), and the rewritten module equals the
original on XLA:CPU for random and edge inputs (out-of-range, negative and duplicate ids,
all-masked bags, nodes without edges) -- bitwise unless the model states a tolerance."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ember_xla.hlo.verifier import verify_module
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

lm = sys.modules["library_models"]  # loaded by conftest.py

IDIOMS = {"vmap", "scalar-scale", "per-row-scale", "one-hot", "where-mask-0",
          "where-mask-inf", "keras-mask", "take-wrap", "multi-output", "leading-bag-axis",
          "batched-reshape", "einsum-mask", "shared-gather", "stacked-tables", "batched-bag",
          "position-weights", "rows-as-bf16", "count-as-lookup"}


def test_every_idiom_has_a_library_model():
    covered = {i for m in lm.MODELS.values() for i in m.idioms}
    assert covered == IDIOMS
    libraries = {m.library for m in lm.MODELS.values()}
    assert {"flax", "haiku", "equinox", "jraph", "keras", "keras-rs", "tensorflow"} <= libraries


@pytest.mark.parametrize("name", sorted(lm.MODELS))
def test_library_model_rewrite(name):
    m = lm.MODELS[name]
    model = lm.export(name)
    result = rewrite_module(model.module, assume_finite_tables=m.assume_finite_tables)
    assert len(result.clusters) == m.clusters, result.near_misses
    if m.clusters:
        assert len(result.near_misses) == m.near_misses, result.near_misses
        assert not any("row gather" not in n["reason"] and "bag reduced" not in n["reason"]
                       and "take's out-of-bounds fill" not in n["reason"]
                       for n in result.near_misses), result.near_misses
    else:  # kept in XLA on purpose: the report must say why
        assert any("YNNPACK" in n["reason"] or "in the order" in n["reason"]
                   for n in result.near_misses), result.near_misses
    verify_module(result.module)
    for case in ("random", "edge"):
        args = lm.inputs(name, case)
        want = run_module(model.module, args)
        got = run_module(result.module, args)
        for a, b in zip(got, want, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            if m.tolerance == 0.0:
                assert a.tobytes() == b.tobytes() or np.array_equal(a, b, equal_nan=True), (
                    case, a, b)
            else:
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                                           rtol=m.tolerance, atol=m.tolerance, equal_nan=True,
                                           err_msg=f"{name}/{case}")


@pytest.mark.parametrize("name", sorted(n for n, m in lm.MODELS.items()
                                        if m.assume_finite_tables))
def test_one_hot_lookup_needs_finite_tables(name):
    """Without the finite-table promise the one-hot dot stays, and the report says why."""
    result = rewrite_module(lm.export(name).module)
    assert not result.clusters
    reasons = [n["reason"] for n in result.near_misses]
    assert any("no Inf/NaN" in r and "assume_finite_tables" in r for r in reasons), reasons


def test_keras_rs_distributed_embedding_mean_is_bitwise():
    """keras-rs's ``DistributedEmbedding`` (a ``mean`` table, no weights given) multiplies the
    rows by ones before the sum: XLA folds ``rows * 1``, so the bag is added in an unweighted
    bag's order; taken for a weighted bag it was rewritten in the weighted order and differed
    in the last bits (measured at [64,10,32], YNNPACK's size)."""
    import keras
    import keras_rs

    from ember_xla.hlo_import.tf_source import from_tf_function

    b, p, n, d = 64, 10, 500, 32
    table = keras_rs.layers.TableConfig(
        name="t", vocabulary_size=n, embedding_dim=d, combiner="mean",
        initializer=keras.initializers.RandomNormal(seed=5))
    layer = keras_rs.layers.DistributedEmbedding(
        {"f": keras_rs.layers.FeatureConfig(name="f", table=table, input_shape=(b, p),
                                            output_shape=(b, d))})
    rng = np.random.default_rng(6)
    ids = rng.integers(0, n, (b, p)).astype(np.int32)
    model = from_tf_function(lambda i: layer({"f": i})["f"], ids, source="keras_rs")
    result = rewrite_module(model.module, cost_model=False)
    assert [c["pattern"] for c in result.clusters] == ["ember.padded_bag"], result.near_misses
    assert not result.clusters[0]["attributes"]["weighted"]
    for i in (ids, rng.integers(-n, 2 * n, (b, p)).astype(np.int32)):
        args = [i] + [model.bound[k] for k in sorted(model.bound)]
        got, want = run_module(result.module, args), run_module(model.module, args)
        assert all(a.tobytes() == w.tobytes() for a, w in zip(got, want, strict=True))
