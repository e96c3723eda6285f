"""Padded bags of an f32 table converted to bf16 (flax ``nn.Embed(dtype=bfloat16)`` over f32
parameters: ``jnp.take(t.astype(bf16), ids).sum(1)``) read the f32 table with
``row_type="bf16"``, the kernel rounding each value as it reads it: bit for bit XLA:CPU's
result under both excess-precision settings, in every sum order, for values whose rounding
decides (ties, denormals, NaNs, values rounding to inf) and out-of-range ids (outputs equal
bit for bit, NaN positions compared, not payloads). A convert
other code reads too, and weighted bags, keep the converted table as the operand."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from training_steps import same_bits

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module


def _table(rng, n: int, d: int) -> np.ndarray:
    """Random values, a quarter of them ones whose bf16 rounding decides (halfway ties: 1 + 2^-8
    rounds to even 1, 1 + 3 * 2^-8 up; f32 denormals; -0.0), and a few that poison a sum
    (NaNs with payloads below bf16's bits, +-inf, the largest f32, which rounds to inf)."""
    decisive = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1e-39, -3e-39, -0.0, 65504.0],
                        np.float32)
    poison = np.concatenate([np.array([np.inf, -np.inf, 3.4028235e38], np.float32),
                             np.array([0x7f800001, 0xffc00001, 0x7fbfffff],
                                      np.uint32).view(np.float32)])
    t = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-4, 4, (n, d)))).astype(np.float32)
    u = rng.random((n, d))
    t[u < 0.25] = rng.choice(decisive, int((u < 0.25).sum()))
    t[u > 0.997] = rng.choice(poison, int((u > 0.997).sum()))
    return t


def _model(form: str, b: int, p: int, d: int, n: int = 300, mode: str = "fill", seed: int = 0):
    import jax.numpy as jnp

    rng = np.random.default_rng([b, p, d, seed])
    table = _table(rng, n, d)
    lo, hi = (-n - 3, n + 3) if mode == "fill" else (0, n)
    ids = rng.integers(lo, hi, (b, p)).astype(np.int32)

    def rows(t, i):
        return jnp.take(t.astype(jnp.bfloat16), i, axis=0, mode=mode)

    fns = {
        "sum": lambda t, i: rows(t, i).sum(1),                        # bf16 result
        "mean": lambda t, i: rows(t, i).mean(1),
        "f32_sum": lambda t, i: rows(t, i).astype(jnp.float32).sum(1),
        "max": lambda t, i: rows(t, i).max(1),
    }
    return from_jax(fns[form], table, ids), [table, ids]


# (B, P, D): shapes where XLA:CPU sums the bag in each order the kernel reproduces for bf16
# rows: one after the other below YNNPACK's sizes, tree32 windows, YNNPACK's blocked order (D a
# multiple of 64 with bags of <= 16 and > 16 rows, of 32, 16 and 8, and none of these)
SHAPES = [(3, 5, 4), (2, 100, 8), (256, 12, 64), (256, 20, 64), (64, 40, 32), (16, 30, 16),
          (8, 70, 8), (64, 40, 12)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("form", ["sum", "mean", "f32_sum"])
def test_bf16_bag_of_an_f32_table_reads_it_bit_equal(form, shape):
    model, args = _model(form, *shape)
    for excess in (True, False):
        result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
        (c,) = result.clusters
        assert c["kind"] == "padded_bag" and c["attributes"]["row_type"] == "bf16"
        assert c["table"]["dtype"] == "f32" and c["table"]["parameter_number"] == 0
        opts = {"xla_allow_excess_precision": excess}
        want = run_module(model.module, args, opts)
        got = run_module(result.module, args, opts)
        assert all(same_bits(g, w) for g, w in zip(got, want, strict=True)), (form, shape, excess)


def test_the_shapes_cover_every_sum_order():
    orders = set()
    for shape in SHAPES:
        model, _ = _model("sum", *shape)
        (c,) = rewrite_module(model.module, cost_model=False).clusters
        orders.add(c["attributes"]["sum_order"])
    assert orders == {"sequential", "tree32", "blocked"}, orders


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_clip_and_fill_ids(mode):
    model, args = _model("f32_sum", 32, 12, 16, mode=mode)
    result = rewrite_module(model.module, cost_model=False)
    assert [c["attributes"]["row_type"] for c in result.clusters] == ["bf16"]
    assert same_bits(run_module(result.module, args)[0], run_module(model.module, args)[0])


def test_max_bag_is_bit_equal_whatever_it_reads():
    model, args = _model("max", 16, 12, 16)
    result = rewrite_module(model.module, cost_model=False)
    for c in result.clusters:
        assert c["attributes"]["row_type"] in ("", "bf16")
    assert same_bits(run_module(result.module, args)[0], run_module(model.module, args)[0])


def test_a_convert_other_code_reads_stays_the_operand():
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    table, ids = _table(rng, 100, 16), rng.integers(0, 100, (32, 10)).astype(np.int32)

    def f(t, i):  # the converted table also feeds a tied output projection
        tb = t.astype(jnp.bfloat16)
        return jnp.take(tb, i, axis=0).sum(1), tb.sum(0)

    model = from_jax(f, table, ids)
    result = rewrite_module(model.module, cost_model=False)
    (c,) = result.clusters
    assert c["attributes"]["row_type"] == "" and c["table"]["dtype"] == "bf16"
    got, want = run_module(result.module, [table, ids]), run_module(model.module, [table, ids])
    assert all(same_bits(g, w) for g, w in zip(got, want, strict=True))


def test_weighted_bags_keep_the_converted_table():
    import jax.numpy as jnp

    rng = np.random.default_rng(2)
    table, ids = _table(rng, 100, 16), rng.integers(0, 100, (32, 10)).astype(np.int32)
    w = rng.standard_normal((32, 10)).astype(np.float32)

    def f(t, i, w):
        return (jnp.take(t.astype(jnp.bfloat16), i, axis=0) * w[..., None]).sum(1)

    model = from_jax(f, table, ids, w)
    result = rewrite_module(model.module, cost_model=False)
    for c in result.clusters:
        assert c["attributes"]["row_type"] == ""
    got, want = run_module(result.module, [table, ids, w]), run_module(model.module,
                                                                       [table, ids, w])
    assert all(same_bits(g, w) for g, w in zip(got, want, strict=True))


def test_the_cost_model_no_longer_charges_a_converted_table():
    """Before, the call read the converted table, which XLA:CPU wrote out on every call: a
    million-row table kept every bag in XLA."""
    import jax
    import jax.numpy as jnp

    def f(t, i):
        return jnp.take(t.astype(jnp.bfloat16), i, axis=0).sum(1)

    spec = (jax.ShapeDtypeStruct((1_000_000, 64), jnp.float32),
            jax.ShapeDtypeStruct((256, 20), jnp.int32))
    model = from_jax(f, *spec)
    (c,) = rewrite_module(model.module, cost_model=True).report()["clusters"]
    assert c["attributes"]["row_type"] == "bf16" and c["decision"] == "separate"
    assert c["predicted_us"]["ember"] < c["predicted_us"]["xla"]


def test_flax_embed_with_a_bf16_dtype_reads_the_f32_params():
    lm = sys.modules["library_models"]  # loaded by conftest.py
    result = rewrite_module(lm.export("flax_embed_bf16_compute_bag_mean").module)
    assert [(c["attributes"]["row_type"], c["table"]["dtype"]) for c in result.clusters] == [
        ("bf16", "f32")], result.near_misses


# (B, P, D) and what the call reads: rows rounded after the gather are read as bf16 below
# YNNPACK's sizes (4096 elements); from them on YNNPACK's fusion sums the f32 rows unrounded
CAST_AFTER = [((3, 5, 4), "bf16", "sequential"), ((2, 100, 8), "bf16", "tree32"),
              ((2, 40, 8), "bf16", "tree32"), ((256, 12, 64), "", "blocked"),
              ((64, 40, 32), "", "blocked"), ((64, 40, 12), "", "blocked")]


@pytest.mark.parametrize("shape, row_type, order", CAST_AFTER)
@pytest.mark.parametrize("form", ["sum", "mean_cast_back"])
def test_rows_cast_to_bf16_after_the_gather(form, shape, row_type, order):
    import jax.numpy as jnp

    b, p, d = shape
    rng = np.random.default_rng([b, p, d, 7])
    table = _table(rng, 300, d)
    ids = rng.integers(-303, 303, (b, p)).astype(np.int32)

    def f(t, i):
        rows = jnp.take(t, i, axis=0).astype(jnp.bfloat16)
        if form == "sum":
            return rows.sum(1)
        return rows.astype(jnp.float32).mean(1).astype(jnp.bfloat16)  # Keras' pooling

    model = from_jax(f, table, ids)
    for excess in (True, False):
        result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
        assert [(c["attributes"]["row_type"], c["attributes"]["sum_order"], c["table"]["dtype"])
                for c in result.clusters] == [(row_type, order, "f32")], result.near_misses
        opts = {"xla_allow_excess_precision": excess}
        got = run_module(result.module, [table, ids], opts)
        want = run_module(model.module, [table, ids], opts)
        assert all(same_bits(g, w) for g, w in zip(got, want, strict=True)), (shape, excess)


def test_rows_cast_after_the_gather_with_weights_are_a_near_miss():
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    table, ids = _table(rng, 100, 4), rng.integers(0, 100, (3, 5)).astype(np.int32)
    w = rng.standard_normal((3, 5)).astype(np.float32)

    def f(t, i, w):  # f32 products rounded to bf16, then summed
        return (jnp.take(t, i, axis=0) * w[..., None]).astype(jnp.bfloat16).sum(1)

    result = rewrite_module(from_jax(f, table, ids, w).module, cost_model=False)
    assert not result.clusters
    assert any("rounded to bf16 after the gather" in m["reason"] for m in result.near_misses), \
        result.near_misses


@pytest.mark.parametrize("shape", [(3, 5, 4), (2, 100, 8), (256, 20, 64)])
def test_masked_bags_read_the_f32_table_as_bf16(shape):
    """``jnp.where(mask, rows, 0).sum(1)`` over the converted table: the mask operand and the
    rows read as bf16 together, in each order."""
    import jax.numpy as jnp

    b, p, d = shape
    rng = np.random.default_rng([b, p, d, 9])
    table = _table(rng, 300, d)
    ids = rng.integers(-303, 303, (b, p)).astype(np.int32)
    mask = rng.random((b, p)) < 0.7

    def f(t, i, m):
        return jnp.where(m[..., None], jnp.take(t.astype(jnp.bfloat16), i, axis=0), 0).sum(1)

    model = from_jax(f, table, ids, mask)
    for excess in (True, False):
        result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
        assert [c["attributes"]["row_type"] for c in result.clusters] == ["bf16"]
        opts = {"xla_allow_excess_precision": excess}
        got = run_module(result.module, [table, ids, mask], opts)
        want = run_module(model.module, [table, ids, mask], opts)
        assert all(same_bits(g, w) for g, w in zip(got, want, strict=True)), (shape, excess)
