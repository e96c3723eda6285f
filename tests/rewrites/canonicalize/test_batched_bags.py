"""batched-bags: a bag whose lookups have other dims than [B,P] (ids [B,F,P], a bag over a
middle axis, one bag of 1-D ids) becomes a [M,P,D] bag reduced over axis 1 and reshaped back,
through converts, weights, masks and jnp.take's fill; the values are bitwise the same
(the ``canon`` fixture runs both modules, edge ids included)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

PIPE = "inline-calls,lookup-layout,batched-bags"
RNG = np.random.default_rng(3)
IDS = RNG.integers(-12, 24, (3, 2, 5)).astype(np.int32)   # negative and out-of-range too
EDGE = np.array([[[0, 0, 0, 11, -1], [-12, 9, 9, 9, 2]]] * 3, np.int32)


def _bags(work):
    return [op for op in work.entry.ops
            if op.opcode == "reduce" and op.result.type.element_type != "pred"]


def _check(canon, f, extra=(), p=5):
    args = [canon.table(n=12, d=8), IDS, *extra]
    work, _ = canon(f, args, PIPE, inputs=[[canon.table(n=12, d=8, seed=5), EDGE, *extra]])
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [1]
    assert red.operands[0].type.rank == 3 and red.operands[0].type.dims[1] == p
    return work


CASES = {
    "sum_over_bag": lambda t, i: t[i].sum(2),
    "mean": lambda t, i: jnp.mean(t[i], axis=2),
    "max": lambda t, i: t[i].max(2),
    "offsets_into_one_table": lambda t, i: t[i + jnp.array([0, 6])[None, :, None]].sum(2),
    "take_fill": lambda t, i: jnp.take(t, i, axis=0).sum(2),
    "bf16_rows": lambda t, i: t.astype(jnp.bfloat16)[i].astype(jnp.float32).sum(2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_three_d_ids_become_one_bag_per_feature(canon, name):
    _check(canon, CASES[name])


def test_per_lookup_weights_are_regrouped(canon):
    w = RNG.standard_normal((3, 2, 5)).astype(np.float32)
    work = _check(canon, lambda t, i, w: (t[i] * w[..., None]).sum(2), [w])
    mul = next(op for op in work.entry.ops if op.opcode == "multiply")
    b = next(o for o in mul.operands if o.owner.opcode == "broadcast")
    assert b.owner.attributes["dimensions"] == [0, 1]
    assert tuple(b.owner.operands[0].type.dims) == (6, 5)


def test_position_weights_and_masks_are_regrouped(canon):
    pw = np.array([1.0, -0.0, np.inf, 2.5, -3.0], np.float32)
    _check(canon, lambda t, i, w: (t[i] * w[None, None, :, None]).sum(2), [pw])
    mask = RNG.random((3, 2, 5)) < 0.5
    _check(canon, lambda t, i, m: jnp.where(m[..., None], t[i], 0.0).sum(2), [mask])


def test_bag_over_a_middle_axis_transposes_the_ids(canon):
    work = _check(canon, lambda t, i: t[i].sum(1), p=2)
    assert "transpose" in canon.opcodes(work)


def test_one_bag_of_flat_ids(canon):
    ids = np.array([3, -1, 11, 11, 0, 40], np.int32)
    work, _ = canon(lambda t, i: t[i].sum(0), [canon.table(n=12, d=8), ids], PIPE)
    (red,) = _bags(work)
    assert tuple(red.operands[0].type.dims) == (1, 6, 8)


def test_reduction_over_two_axes_is_left_alone(canon):
    """XLA:CPU adds sum((1, 2)) of [3,2,5,8] in another order than one bag of 10 rows."""
    work, _ = canon(lambda t, i: t[i].sum((1, 2)), [canon.table(n=12, d=8), IDS], PIPE)
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [1, 2]


def test_weight_per_bag_is_left_alone(canon):
    """A weight constant along the bag is factored out of the sum by XLA:CPU."""
    w = RNG.standard_normal((3, 2)).astype(np.float32)
    work, _ = canon(lambda t, i, w: (t[i] * w[..., None, None]).sum(2),
                    [canon.table(n=12, d=8), IDS, w], PIPE)
    (red,) = _bags(work)
    assert red.operands[0].type.rank == 4


def test_bag_merged_into_a_loss_is_left_alone(canon):
    """XLA:CPU merges ``t[ids].sum(2).sum()`` into one reduce; regrouping the bag would change
    how (the bag stays in XLA, as the padded-bag pattern says)."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    def f(t, i):
        return t[i].sum(2).sum()

    args = [canon.table(n=12, d=8), IDS]
    work, _ = canon(f, args, PIPE)
    assert [op.operands[0].type.rank for op in _bags(work)] == [4, 3]
    r = rewrite_module(from_jax(f, *args).module, cost_model=False)
    assert not r.clusters
    assert any("merges the two into one reduce" in n["reason"] for n in r.near_misses)


@pytest.mark.parametrize("shape", [(3, 2, 5, 8), (256, 4, 6, 64), (512, 8, 20, 128)])
@pytest.mark.parametrize("form", ["plain", "offsets", "weighted"])
def test_batched_bag_is_rewritten_bit_exact(shape, form):
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    b, f, p, d = shape
    n = 1000
    rng = np.random.default_rng(4)
    table = rng.standard_normal((n, d)).astype(np.float32)
    ids = rng.integers(-n // f, 2 * n // f, (b, f, p)).astype(np.int32)
    w = rng.standard_normal((b, f, p)).astype(np.float32)
    fns = {
        "plain": (lambda t, i: t[i].sum(2), [table, ids]),
        "offsets": (lambda t, i: t[i + (jnp.arange(f) * (n // f))[None, :, None]].sum(2)
                    .reshape(b, f * d), [table, ids]),
        "weighted": (lambda t, i, w: (t[i] * w[..., None]).sum(2), [table, ids, w]),
    }
    fn, args = fns[form]
    m = from_jax(jax.jit(fn), *args).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["padded_bag"], r.near_misses
    for opts in ({}, {"xla_allow_excess_precision": False}):
        got = run_module(r.module, args, opts)[0]
        want = run_module(m, args, opts)[0]
        assert got.tobytes() == want.tobytes()
