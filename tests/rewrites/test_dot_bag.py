"""Masked and weighted bags written as a product over the bag axis (``jnp.einsum`` /
``lax.dot_general``) become ``ember.padded_bag`` calls bit for bit equal to XLA:CPU under both
excess-precision settings, at shapes where XLA sums a plain reduce in another order; what the
pattern refuses is a near-miss with its reason, never silent (the coverage audit counts
dots over the bag axis)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.coverage import lookup_reductions
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module


def _bag(form: str, shape: tuple[int, int, int], dtype=np.float32):
    import jax
    import jax.numpy as jnp

    b, ln, d = shape
    rng = np.random.default_rng(list(shape))
    table = (rng.standard_normal((50, d)) * 3).astype(dtype)
    ids = rng.integers(-3, 53, (b, ln)).astype(np.int32)  # out-of-range ids: NaN rows
    w = rng.standard_normal((b, ln)).astype(dtype)
    dn = (((1,), (1,)), ((0,), (0,)))

    def f(t, i, m):
        rows = jnp.take(t, i, axis=0)
        if form == "einsum":
            return jnp.einsum("bl,bld->bd", m, rows)
        if form == "einsum_rows_first":
            return jnp.einsum("bld,bl->bd", rows, m)
        return jax.lax.dot_general(m, rows, dn)

    return from_jax(f, table, ids, w), [table, ids, w]


@pytest.mark.parametrize("form", ["einsum", "einsum_rows_first", "dot_general"])
@pytest.mark.parametrize("shape", [(12, 7, 16), (256, 20, 64), (4, 40, 16)])
def test_dot_bag_is_rewritten_bit_equal(form, shape):
    model, args = _bag(form, shape)
    for excess in (True, False):
        result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
        assert [(c["kind"], c["attributes"]["weighted"]) for c in result.clusters] == [
            ("padded_bag", True)], result.near_misses
        opts = {"xla_allow_excess_precision": excess}
        want = run_module(model.module, args, opts)
        got = run_module(result.module, args, opts)
        assert np.array_equal(got[0], want[0], equal_nan=True)


def test_bf16_dot_bag_is_a_near_miss_not_silent():
    model, _ = _bag("einsum", (12, 7, 16), ml_dtypes.bfloat16)
    result = rewrite_module(model.module, cost_model=False)
    assert not result.clusters
    reasons = [n["reason"] for n in result.near_misses]
    assert any("only f32 bag products" in r for r in reasons), reasons


def test_coverage_counts_a_dot_over_the_bag_axis_only():
    """A gather reaching a dot over its bag axis is a lookup reduction; one reaching a dot
    over the row width (an MLP layer on the rows) is not."""
    import jax.numpy as jnp

    model, _ = _bag("einsum", (12, 7, 16))
    assert [r.opcode for _, r in lookup_reductions(model.module)] == ["dot"]
    t = np.ones((50, 16), np.float32)
    mlp = from_jax(lambda t, i, w: jnp.take(t, i, axis=0) @ w, t,
                   np.zeros((12, 7), np.int32), np.ones((16, 4), np.float32))
    assert lookup_reductions(mlp.module) == []
