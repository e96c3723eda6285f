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
from ember_xla.rewrites.patterns.dot_bag import DotBag
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module


def _bag(form: str, shape: tuple[int, int, int], dtype=np.float32, in_range: bool = False):
    import jax
    import jax.numpy as jnp

    b, ln, d = shape
    rng = np.random.default_rng(list(shape))
    table = (rng.standard_normal((50, d)) * 3).astype(dtype)
    # out-of-range ids: NaN rows; in_range (long bags, where a NaN row would hide the order)
    ids = rng.integers(*((0, 50) if in_range else (-3, 53)), (b, ln)).astype(np.int32)
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


# The one order rule's dot shapes (native/padded_order.py, _dot_order), measured on XLA:CPU:
# D <= 16, B = 1 and P * D > 32768 at YNNPACK sizes (where a weighted *reduce* has other
# orders) are still one fma per row for a dot; D = 3; D = 1 with P < 16 (the dot becomes a
# multiply and a reduce, whose rule applies). Kept: D = 2, and D = 1 with P >= 16.
REWRITTEN = [(256, 20, 16), (1, 300, 64), (2, 600, 64), (16, 40, 3), (64, 10, 1)]
KEPT = [(16, 40, 2), (256, 40, 2), (1, 100, 1), (256, 40, 1)]


@pytest.mark.parametrize("shape", REWRITTEN)
def test_dot_bag_order_rule_rewrites_bit_equal(shape):
    model, args = _bag("einsum", shape, in_range=True)
    for excess in (True, False):
        result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
        assert [c["kind"] for c in result.clusters] == ["padded_bag"], result.near_misses
        opts = {"xla_allow_excess_precision": excess}
        want = run_module(model.module, args, opts)
        got = run_module(result.module, args, opts)
        assert np.array_equal(got[0], want[0], equal_nan=True)


@pytest.mark.parametrize("shape", KEPT)
def test_dot_bag_order_not_reproduced_stays_in_xla(shape):
    model, args = _bag("einsum", shape, in_range=True)
    result = rewrite_module(model.module, cost_model=False)
    assert not result.clusters
    assert any("order" in n["reason"] for n in result.near_misses), result.near_misses
    # and the order really is not the kernel's row-after-row fma: forced, it differs
    forced = rewrite_module(model.module, [DotBag(xla_order=False)], cost_model=False)
    assert [c["kind"] for c in forced.clusters] == ["padded_bag"], forced.near_misses
    got = run_module(forced.module, args)
    assert not np.array_equal(got[0], run_module(model.module, args)[0], equal_nan=True)


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
