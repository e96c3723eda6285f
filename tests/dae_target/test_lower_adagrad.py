"""The fused Adagrad updates lowered to the Ember levels: ``ember.sparse_adagrad`` (optax's
Adagrad: XLA's rsqrt as the estimate instruction refined by Newton-Raphson steps),
``ember.sparse_adagrad_keras`` (Keras 3's, the same rsqrt) and
``ember.sparse_rowwise_adagrad`` (hand-written and optax forms, learning rate folded or an
argument, the row-wise mean of squares in YNNPACK's blocked16 order), from real JAX training
steps, lowered at -O0..-O4, every stage's interpreter compared bit for bit with the call's
outlined computation on XLA:CPU (the kernel where the learning rate is folded) and the last
with the native kernel, on random ids and the edge cases
of ``check`` (duplicates, every id out of range, no update kept; negative, zero, infinite and
positive learning rates; eps 0 and < 0; zero, NaN and infinite accumulators)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import optax
import pytest

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae_target.check import check_lowered, check_spec, summary
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.native.rsqrt_probe import rsqrt_matches_xla
from ember_xla.orchestrate.rewrite_model import rewrite_for

sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
import test_fuse_rowwise as fr  # noqa: E402
import training_steps as ts  # noqa: E402

pytestmark = pytest.mark.skipif(
    not rsqrt_matches_xla(),
    reason="the kernel's rsqrt is not XLA:CPU's on this CPU: the rewrite keeps Adagrad in XLA",
)
RNG = np.random.default_rng(0)


def _check(fn, args, kind, levels=(0, 1, 2, 3, 4)):
    module = rewrite_for(from_jax(fn, *args).module, "dae").module
    calls = [c for c in ember_calls(module) if cluster_spec(c).kind == kind]
    assert len(calls) == 1, [cluster_spec(c).kind for c in ember_calls(module)]
    spec = cluster_spec(calls[0])
    for level in levels:
        stages = lower_cluster(spec, level)
        for name, low in (stages[0], stages[-1]) if level == levels[0] else stages[1:]:
            # a folded lr is a constant of the module but an operand of the outlined
            # computation, which XLA then does not fold: the kernel is the reference there
            res = (
                check_spec(spec, low, rounds=2)
                if spec.lr_folded
                else check_lowered(module, calls[0], low, rounds=2)
            )
            assert res.ok and res.bitwise, (level, name, summary(res))
        res = check_spec(spec, stages[-1][1], rounds=2)
        assert res.reference == "kernel" and res.ok and res.bitwise, (level, summary(res))
    return spec


def test_sparse_adagrad_optax():
    w = ts.head(RNG)
    t = ts.table(RNG)
    opt = optax.adagrad(0.1)
    ids, y = ts.batch(RNG)
    spec = _check(ts.optax_step(ts.bag_index(w), opt), (t, opt.init(t), ids, y), "sparse_adagrad")
    assert spec.roles[:2] == ("table", "accumulator")
    assert [o.shape for o in spec.outputs] == [t.shape, t.shape]


def keras_adagrad_step(loss):
    """Keras 3's Adagrad as its JAX backend computes it (``lr`` a variable)."""
    import jax
    import jax.numpy as jnp

    def step(table, acc, lr, ids, y):
        value, g = jax.value_and_grad(loss)(table, ids, y)
        acc = acc + g * g
        return value, table - (lr * g) / jnp.sqrt(acc + np.float32(1e-7)), acc
    return step


def test_sparse_adagrad_keras():
    w, t = ts.head(RNG), ts.table(RNG)
    acc = np.full_like(t, 0.1)
    ids, y = ts.batch(RNG)
    spec = _check(keras_adagrad_step(ts.bag_index(w)), (t, acc, np.float32(0.1), ids, y),
                  "sparse_adagrad_keras")
    assert spec.roles[:2] == ("table", "accumulator")


@pytest.mark.parametrize("form", ["hand_written", "optax", "lr_argument"])
def test_sparse_rowwise_adagrad(form):
    if not fr._reproduced(fr.V, fr.D):
        pytest.skip("the row-wise mean order is not XLA:CPU's on this CPU")
    w, t, accum, ids, y = fr.setup(1, lo=-400, hi=400)
    if form == "hand_written":
        fn, args = fr.rowwise_step(ts.bag_index(w)), (t, accum, ids, y)
    elif form == "optax":
        fn, args = (
            ts.optax_step(ts.bag_index(w), ts.optax_rowwise_adagrad(0.05)),
            (t, accum, ids, y),
        )
    else:
        fn, args = (
            fr.rowwise_step_lr_arg(ts.bag_index(w)),
            (t, accum, np.float32(0.05), np.float32(1e-8), ids, y),
        )
    spec = _check(fn, args, "sparse_rowwise_adagrad", levels=(0, 3))
    assert spec.sum_order == "blocked16" and spec.lr_folded == (form != "lr_argument")
    assert [o.shape for o in spec.outputs] == [t.shape, accum.shape]


@pytest.mark.parametrize("case", ["sparse_adagrad_gathered", "rowwise_blocked16_folded",
                                  "rowwise_sequential_d5", "ordered_scatter_subtract"])
def test_called_directly_equal_the_kernel(case):
    """The calls as a JAX user writes them through ``jax.ffi`` (the gathered Adagrad form
    with a mask; rowwise with lr folded in blocked16 order, and unfolded in sequential order
    for a D that is no power of two; Keras's subtracting scatter), at -O0..-O4 against the
    native kernel on random and edge inputs."""
    from helper_modules import load_helper

    dae_cases = load_helper("emulator/dae_cases.py")
    _, spec = dae_cases.lowered(case)
    for level in range(5):
        res = check_spec(spec, lower_cluster(spec, level)[-1][1], rounds=3)
        assert res.ok and res.bitwise, (level, summary(res))
