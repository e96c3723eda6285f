"""The one precision rule (docs/CUSTOM_CALL.md), differentially against XLA:CPU: f32, bf16 and
f16 tables x unweighted / weighted x every combiner x segment (scatter) and padded (reduce)
bags x ``xla_allow_excess_precision`` true and false. The rewrite is told the setting the
module will be compiled with; every output is bit for bit XLA:CPU's under that setting, or the
cluster stays in XLA with the reason. Also the two models of the report: a haiku bf16 bag with
per-id weights, and TF ``tf.nn.embedding_lookup`` on a bf16 table."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.native.padded_order import YNN_MIN_ELEMENTS
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
N = 50
#: (B, L, D) of the bags: ones XLA:CPU sums row after row, and ones it sums otherwise
#: (measured with jaxlib 0.10.2: an f32 reduce of 4096 elements and more goes to YNNPACK,
#: a bag axis longer than 32 becomes a tree of reduce-windows, [2,32,16] another order)
SHAPES = [(12, 7, 16), (4, 8, 64), (8, 8, 64), (6, 40, 16), (2, 32, 16)]


def _expected_kept(form: str, combiner: str, dtype: str, weighted: bool, excess: bool,
                   shape: tuple[int, int, int]) -> str | None:
    """The reason a case stays in XLA (a fragment of it), "order" where XLA:CPU's order may
    be another (native/padded_order.py decides), None if it must be rewritten."""
    if form == "padded" and combiner in ("max", "min") and dtype != "f32":
        return "YNNPACK"  # bf16/f16: YNNPACK's integer compares, not modelled (padded_order.py)
    if form == "padded" and dtype == "bf16" and weighted and not excess and \
            shape[0] * shape[1] * shape[2] < YNN_MIN_ELEMENTS:
        # XLA's own reduce loop rounds the product to bf16; YNNPACK (from 4096 elements)
        # keeps the exact f32 product under both settings, as the kernel does
        return "xla_allow_excess_precision=false"
    return None


def _model(form: str, combiner: str, dtype: str, weighted: bool, shape: tuple[int, int, int]):
    import jax
    import jax.numpy as jnp

    b, ln, d = shape
    rng = np.random.default_rng([b, ln, d, len(combiner), len(dtype), weighted])
    dt = DTYPES[dtype]
    table = (rng.standard_normal((N, d)) * 3).astype(dt)
    reduce = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max, "min": jnp.min}

    def padded(t, ids, *w):
        rows = jnp.take(t, ids, axis=0)
        if w:
            rows = rows * w[0][..., None]
        return reduce[combiner](rows, axis=1)

    def segment(t, ids, seg, *w):
        rows = jnp.take(t, ids, axis=0)
        if w:
            rows = rows * w[0][:, None]
        if combiner == "mean":
            total = jax.ops.segment_sum(rows, seg, num_segments=b)
            count = jax.ops.segment_sum(jnp.ones_like(seg, dtype=rows.dtype), seg,
                                        num_segments=b)
            return total / jnp.maximum(count, 1)[:, None]
        op = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max,
              "min": jax.ops.segment_min}[combiner]
        return op(rows, seg, num_segments=b)

    if form == "padded":
        args = [table, rng.integers(0, N, (b, ln)).astype(np.int32)]
        wshape: tuple[int, ...] = (b, ln)
        fn = padded
    else:
        args = [table, rng.integers(0, N, b * ln).astype(np.int32),
                np.sort(rng.integers(0, b, b * ln)).astype(np.int32)]
        wshape = (b * ln,)
        fn = segment
    if weighted:
        args.append((rng.standard_normal(wshape) * 2).astype(dt))
    return from_jax(fn, *args), args


def check(model, args, excess: bool, kept: str | None) -> None:
    """Rewrite ``model`` for ``excess``; bit-equal to XLA:CPU under it, or kept with ``kept``
    in the reason."""
    result = rewrite_module(model.module, cost_model=False, excess_precision=excess)
    if kept == "order" and not result.clusters:
        reasons = [n["reason"] for n in result.near_misses]
        assert any(w in r for r in reasons for w in ("order", "windows", "YNNPACK")), reasons
        return
    if kept is not None and kept != "order":
        assert not result.clusters, result.clusters
        reasons = [n["reason"] for n in result.near_misses]
        # the bag's summation order may keep it in XLA before its precision is looked at
        assert any(kept in r or "YNNPACK" in r or "order" in r for r in reasons), reasons
        return
    assert len(result.clusters) == 1, result.near_misses
    opts = {"xla_allow_excess_precision": excess}
    want = run_module(model.module, args, opts)
    got = run_module(result.module, args, opts)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        assert np.array_equal(a, b, equal_nan=True), f"max difference {np.nanmax(diff):.3g}"


CASES = [c for c in itertools.product(["segment", "padded"], ["sum", "mean", "max", "min"],
                                      sorted(DTYPES), [False, True])
         if not (c[3] and c[1] in ("max", "min"))]  # a weighted max is no embedding bag


@pytest.mark.parametrize("excess", [True, False], ids=["excess", "noexcess"])
@pytest.mark.parametrize("form,combiner,dtype,weighted", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
def test_bit_equal_to_xla_or_kept(form, combiner, dtype, weighted, excess):
    rewritten = 0
    orders = 0
    for shape in SHAPES if form == "padded" else SHAPES[:1]:
        kept = _expected_kept(form, combiner, dtype, weighted, excess, shape)
        model, args = _model(form, combiner, dtype, weighted, shape)
        order = form == "padded" and kept is None
        orders += order
        check(model, args, excess, "order" if order else kept)
        rewritten += bool(order and rewrite_module(model.module, cost_model=False,
                                                   excess_precision=excess).clusters)
    if orders:  # bags kept for their order are a few shapes: at least one is rewritten
        assert rewritten >= 1


def test_excess_precision_follows_xla_flags(monkeypatch):
    """With no setting given, the rewrite takes the one XLA_FLAGS gives XLA:CPU."""
    from ember_xla.rewrites.precision import excess_precision_from_env

    model, _ = _model("padded", "sum", "bf16", True, SHAPES[0])
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true "
                       "--xla_allow_excess_precision=false")
    assert excess_precision_from_env() is False
    assert not rewrite_module(model.module, cost_model=False).clusters
    monkeypatch.setenv("XLA_FLAGS", "--xla_allow_excess_precision=true")
    assert len(rewrite_module(model.module, cost_model=False).clusters) == 1
    monkeypatch.setenv("XLA_FLAGS", "--xla_allow_excess_precision=maybe")
    with pytest.raises(ValueError, match="not true or false"):
        excess_precision_from_env()


@pytest.mark.parametrize("excess", [True, False], ids=["excess", "noexcess"])
def test_haiku_bf16_weighted_bag(excess):
    import haiku as hk
    import jax
    import jax.numpy as jnp

    def net(ids, w):
        e = hk.Embed(vocab_size=300, embed_dim=32)(ids)  # bf16 [B, L, 32] (bf16 params)
        return jnp.sum(e * w[..., None], axis=1)

    f = hk.without_apply_rng(hk.transform(net))
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 300, (64, 10)).astype(np.int32)
    w = rng.standard_normal((64, 10)).astype(ml_dtypes.bfloat16)
    params = f.init(jax.random.PRNGKey(0), ids, w)  # f32; served in bf16:
    table = np.asarray(params["embed"]["embeddings"]).astype(ml_dtypes.bfloat16)
    assert table.dtype == ml_dtypes.bfloat16
    model = from_jax(lambda t, i, x: f.apply({"embed": {"embeddings": t}}, i, x),
                     table, ids, w)
    # [64, 10, 32]: >= 4096 elements, so XLA:CPU gives the weighted reduce to YNNPACK, which
    # makes it a dot adding the exact f32 products row after row with one fused multiply-add
    # each (D >= 17, B >= 2, P * D <= 32768; docs/RELIABILITY.md, "The order of a padded bag's
    # sum"), under both settings: rewritten and bit-equal with and without excess precision
    check(model, [table, ids, w], excess, None)


@pytest.mark.parametrize("excess", [True, False], ids=["excess", "noexcess"])
@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean", "segment_sum",
                                    "weighted_sum"])
def test_tf_embedding_lookup_bf16(reduce, excess):
    import tensorflow as tf

    from ember_xla.hlo_import.tf_source import from_tf_function

    rng = np.random.default_rng(11)
    table = tf.constant((rng.standard_normal((200, 16)) * 3).astype(ml_dtypes.bfloat16))
    ids = rng.integers(0, 200, (32, 6)).astype(np.int32)
    w = rng.standard_normal((32, 6)).astype(ml_dtypes.bfloat16)
    seg = np.repeat(np.arange(32), 6).astype(np.int32)

    def fn(t, i, x):
        rows = tf.nn.embedding_lookup(t, i)  # [32, 6, 16] bf16
        if reduce == "reduce_sum":
            return tf.reduce_sum(rows, axis=1)
        if reduce == "reduce_mean":
            return tf.reduce_mean(rows, axis=1)
        if reduce == "weighted_sum":
            return tf.reduce_sum(rows * x[..., None], axis=1)
        return tf.math.unsorted_segment_sum(tf.reshape(rows, [-1, 16]), seg, 32)

    args = [table.numpy(), ids, w]
    model = from_tf_function(fn, *args)
    kept = "xla_allow_excess_precision=false" if reduce == "weighted_sum" and not excess \
        else None
    check(model, args, excess, kept)
