"""The backward of a lookup lowered to the Ember levels: ``ember.scatter_grad`` (plain and
gathered updates, with the bounds mask of a segment sum; f32, bf16 and f16 gradients; s32
and s64 ids) and ``ember.sparse_sgd`` (optax, hand-written, learning rate as an argument)
from real JAX training steps, lowered at -O0..-O4 and every stage's interpreter (SLC, SLCV,
DLC) compared bit for bit with the call's outlined computation on XLA:CPU on random ids and
the edge cases of ``check`` (all-duplicate ids, all ids out of range, no update kept); the
scale is drawn negative, -0.0 (zero learning rate) and positive; Keras's ``ordered_scatter``
likewise (the fused Adagrad updates: test_lower_adagrad.py); the fma of the numerics is
checked against exact arithmetic."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import jax
import numpy as np
import optax
import pytest

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae.numerics import fma
from ember_xla.dae_target.check import check_lowered, summary
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.orchestrate.rewrite_model import rewrite_for

sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
import training_steps as ts  # noqa: E402

RNG = np.random.default_rng(0)
W = ts.head(RNG)


def _calls(fn, args, kinds):
    m = from_jax(fn, *args).module
    r = rewrite_for(m, "dae").module
    calls = [c for c in ember_calls(r) if cluster_spec(c).kind in kinds]
    assert calls, "no backward call in the rewritten step"
    return r, calls


def _check_levels(fn, args, kinds=("scatter_grad", "sparse_sgd"), levels=(0, 1, 2, 3, 4)):
    module, calls = _calls(fn, args, kinds)
    specs = []
    for call in calls:
        spec = cluster_spec(call)
        specs.append(spec)
        for level in levels:
            stages = lower_cluster(spec, level)
            for name, low in (stages[0], stages[-1]) if level == levels[0] else stages[1:]:
                res = check_lowered(module, call, low, rounds=2)
                assert res.ok and res.bitwise, (level, name, summary(res))
    return specs


def _ids(v=ts.V):
    return RNG.integers(0, v, (ts.B, ts.P)).astype(np.int32), RNG.standard_normal(
        ts.B).astype(np.float32)


def test_scatter_grad_plain_updates():
    (spec,) = _check_levels(ts.grad_fn(ts.bag_take(W)), (ts.table(RNG), *_ids()))
    assert spec.kind == "scatter_grad" and spec.roles == ("indices", "updates")


def test_scatter_grad_gathered_with_mask():
    ids, y = _ids()
    seg = np.repeat(np.arange(8), 16).astype(np.int32)
    specs = _check_levels(ts.grad_fn(ts.bag_segments(W, 8)), (ts.table(RNG), ids.ravel(), seg,
                                                               y[:8]))
    assert specs[0].roles == ("indices", "source", "source_rows", "mask")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_scatter_grad_half_precision(dtype):
    import ml_dtypes

    dt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype]
    w = W.astype(dt)

    def loss(table, ids, y):
        return ((table[ids].sum(1) @ w)[..., 0].astype(np.float32) - y).astype(
            np.float32).mean()

    (spec,) = _check_levels(jax.value_and_grad(loss), (ts.table(RNG, dtype=dt), *_ids()),
                            levels=(0, 3))
    assert spec.outputs[0].dtype == dtype


@pytest.mark.parametrize("kind", ["scatter_grad", "sparse_sgd"])
def test_s64_ids_called_directly(kind):
    """The calls as a JAX user writes them through ``jax.ffi`` (s64 ids; no outlined
    computation: checked against the native kernel)."""
    from ember_xla.custom_calls import target_of_kind
    from ember_xla.native import register_targets

    register_targets()
    v, d, n = 9, 5, 14
    call = jax.ffi.ffi_call(target_of_kind(kind).name, jax.ShapeDtypeStruct((v, d), np.float32))
    table = np.zeros((v, d), np.float32)
    ids, upd = np.zeros(n, np.int64), np.zeros((n, d), np.float32)
    args = (ids, upd) if kind == "scatter_grad" else (table, ids, upd, np.float32(0))
    with jax.enable_x64(True):
        module = from_jax(lambda *a: call(*a), *args).module
    (op,) = ember_calls(module)
    spec = cluster_spec(op)
    assert spec.operands[spec.roles.index("indices")].dtype == "s64"
    for level in (0, 3):
        res = check_lowered(module, op, lower_cluster(spec, level)[-1][1], rounds=2)
        assert res.reference == "kernel" and res.ok and res.bitwise, summary(res)


@pytest.mark.parametrize("step", ["optax", "hand_written", "lr_argument"])
def test_sparse_sgd(step):
    t = ts.table(RNG)
    ids, y = _ids()
    if step == "optax":
        opt = optax.sgd(0.1)
        fn, args = ts.optax_step(ts.bag_index(W), opt), (t, opt.init(t), ids, y)
    elif step == "hand_written":
        fn, args = ts.sgd_step(ts.bag_take(W), 0.05), (t, ids, y)
    else:
        fn, args = ts.sgd_step_lr_arg(ts.bag_index(W)), (t, np.float32(0.0), ids, y)
    (spec,) = _check_levels(fn, args, ("sparse_sgd",))
    assert spec.roles[:3] == ("table", "indices", "updates")


def test_ordered_scatter_keras_sgd():
    """Keras SGD's scatter straight into the variable (``ember.ordered_scatter``, combiner
    subtract) at every level, against its outlined computation on XLA:CPU."""
    import training_models as tm

    model = tm.export("keras_embedding_average_sgd")[0]
    module = rewrite_for(model.module, "dae").module
    (call,) = [c for c in ember_calls(module) if cluster_spec(c).kind == "ordered_scatter"]
    spec = cluster_spec(call)
    assert spec.combiner == "subtract" and spec.roles == ("operand", "indices", "updates")
    for level in range(5):
        res = check_lowered(module, call, lower_cluster(spec, level)[-1][1], rounds=2)
        assert res.ok and res.bitwise, (level, summary(res))


def _exact_fma(a: float, b: float, c: float) -> np.float32:
    x = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    lo = np.float32(float(x))  # nearest double, then the f32 neighbours around it
    cands = [lo, np.nextafter(lo, np.float32(np.inf)), np.nextafter(lo, np.float32(-np.inf))]
    best = min(cands, key=lambda f: (abs(Fraction(float(f)) - x),
                                     int(np.float32(f).view(np.uint32)) & 1))
    return np.float32(best)


def test_fma_rounds_once():
    rng = np.random.default_rng(3)
    f = np.float32
    # two products whose f64 sum lands exactly on an f32 midpoint while the exact sum is just
    # above (first) or below (second) it: rounding the f64 sum would pick the wrong side
    ties_a = [1 + 2.0 ** -23, 1 + 2.0 ** -22]
    ties_b = [1 - 2.0 ** -24, 1 - 2.0 ** -24]
    ties_c = [2.0 ** -47 + 2.0 ** -70, 2.0 ** -46 - 2.0 ** -70]
    a = np.concatenate([rng.standard_normal(4000), ties_a]).astype(f)
    b = np.concatenate([rng.standard_normal(4000), ties_b]).astype(f)
    c = np.concatenate([rng.standard_normal(4000), ties_c]).astype(f)
    got = fma(a, b, c, f)
    want = np.array([_exact_fma(x, y, z) for x, y, z in zip(a, b, c, strict=True)])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    naive = (a.astype(np.float64) * b + c).astype(f)
    assert not np.array_equal(naive[-2:].view(np.uint32), want[-2:].view(np.uint32))
    zero = fma(f(0.0), f(-0.1), f(-0.0), f)  # the untouched row of a zero gradient keeps -0
    assert zero == 0.0 and np.signbit(zero)


@pytest.mark.parametrize("which", ["gathered", "sgd"])
def test_shrunk_form_checked_against_the_kernel(which):
    """``lower --verify`` of a backward cluster too big to interpret checks the same form at a
    small size against the native kernel (``check.shrink``)."""
    from ember_xla.dae_target.check import check_spec, shrink

    ids, y = _ids()
    if which == "gathered":
        seg = np.repeat(np.arange(8), 16).astype(np.int32)
        fn, args = ts.grad_fn(ts.bag_segments(W, 8)), (ts.table(RNG), ids.ravel(), seg, y[:8])
    else:
        fn, args = ts.sgd_step(ts.bag_index(W), 0.1), (ts.table(RNG), ids, y)
    _, calls = _calls(fn, args, ("scatter_grad", "sparse_sgd"))
    spec = cluster_spec(calls[0])
    small = shrink(spec, rows=3, lookups=10, width=4, table_rows=7)
    assert small.outputs[0].shape == (7, 4) and small.roles == spec.roles
    assert all(len(a.shape) == len(b.shape) for a, b in zip(small.operands, spec.operands,
                                                             strict=True))
    res = check_spec(small, lower_cluster(small, 3)[-1][1])
    assert res.ok and res.bitwise and res.reference == "kernel", summary(res)
