"""unit-dim-bags: sums of one-value rows written as ``w[ids].sum((1, 2))`` or
``w[ids][..., 0].sum(1)`` become the [B,P,1] bag reduced over axis 1 and reshaped, bitwise
the same values (the ``canon`` fixture runs both modules, edge ids included); a reduction
over more than the unit dim, or of rows that are not a lookup, is left alone."""

import jax.numpy as jnp
import numpy as np
import pytest

PIPE = "inline-calls,lookup-layout,unit-dim-bags,batched-bags"
RNG = np.random.default_rng(5)
IDS = RNG.integers(-12, 24, (3, 7)).astype(np.int32)   # negative and out-of-range too
EDGE = np.array([[0, 0, 11, -1, -12, 9, 2]] * 3, np.int32)


def _bags(work):
    return [op for op in work.entry.ops
            if op.opcode == "reduce" and op.result.type.element_type != "pred"]


@pytest.mark.parametrize("name,f", [
    ("sum over (1, 2)", lambda t, i: jnp.take(t, i, axis=0).sum((1, 2))),
    ("[..., 0] then sum(1)", lambda t, i: jnp.take(t, i, axis=0)[..., 0].sum(1)),
    ("squeeze then mean", lambda t, i: jnp.squeeze(t[i], -1).mean(1)),
    ("converted rows", lambda t, i: t[i].astype(jnp.bfloat16).sum((1, 2))),
    ("ids [B,F,P]", lambda t, i: t[i.reshape(3, 1, 7)][..., 0].sum(2)),
])
def test_unit_row_bags_become_the_canonical_bag(canon, name, f):
    table = canon.table(n=12, d=1)
    ids = IDS
    work, _ = canon(f, [table, ids], PIPE,
                    inputs=[[canon.table(n=12, d=1, seed=5), EDGE]])
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [1], name
    assert red.operands[0].type.dims[1:] == (7, 1), name


def test_a_reduction_of_more_than_the_unit_dim_is_left_alone(canon):
    f = lambda t, i: t[i].sum((0, 1, 2))  # noqa: E731  (the whole batch: one number)
    work, _ = canon(f, [canon.table(n=12, d=1), IDS], PIPE)
    (red,) = _bags(work)
    assert sorted(red.attributes["dimensions"]) == [0, 1, 2]


def test_rows_that_are_not_a_lookup_are_left_alone(canon):
    f = lambda t, x: (t[:3, :1] + x[:, :1, None]).sum((1, 2))  # noqa: E731
    work, _ = canon(f, [canon.table(n=12, d=1), RNG.standard_normal((3, 7)).astype(
        np.float32)], PIPE)
    (red,) = _bags(work)
    assert sorted(red.attributes["dimensions"]) == [1, 2]


@pytest.mark.parametrize("b,p", [(1, 23), (256, 16), (128, 300), (2048, 3)])
def test_the_canonical_bag_is_added_in_xlas_order_where_it_stays_in_xla(canon, b, p):
    """Sizes whose order the kernel does not reproduce stay in XLA as the canonical bag:
    XLA:CPU adds it as it added the original (rows near f32's maximum tell orders apart)."""
    rng = np.random.default_rng(p)
    sign = np.where(rng.random((1000, 1)) < 0.5, -1.0, 1.0)
    table = (rng.uniform(0.5, 1.0, (1000, 1)) * 3e38 * sign).astype(np.float32)
    ids = rng.integers(0, 1000, (b, p)).astype(np.int32)
    for f in (lambda t, i: t[i].sum((1, 2)), lambda t, i: t[i][..., 0].sum(1)):
        work, _ = canon(f, [table, ids], PIPE)
        (red,) = _bags(work)
        assert red.attributes["dimensions"] == [1]


V = RNG.standard_normal((3, 7)).astype(np.float32)
MASK = RNG.random((3, 7)) < 0.6


@pytest.mark.parametrize("name,f,extra", [
    ("weighted, squeezed", lambda t, i, v: (t[i][..., 0] * v).sum(1), [V]),
    ("weighted over (1, 2)", lambda t, i, v: (t[i] * v[..., None]).sum((1, 2)), [V]),
    ("masked, squeezed", lambda t, i, m: jnp.where(m, t[i][..., 0], 0).sum(1), [MASK]),
    ("masked and weighted", lambda t, i, m, v: (jnp.where(m, t[i][..., 0], 0) * v).sum(1),
     [MASK, V]),
])
def test_weighted_and_masked_unit_row_bags(canon, name, f, extra):
    work, _ = canon(f, [canon.table(n=12, d=1), IDS, *extra], PIPE,
                    inputs=[[canon.table(n=12, d=1, seed=5), EDGE, *extra]])
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [1], name
    assert red.operands[0].type.dims[1:] == (7, 1), name


@pytest.mark.parametrize("f", [
    lambda t, i, v: jnp.einsum("bf,bf->b", t[i][..., 0], v),
    lambda t, i, v: jnp.einsum("bf,bf->b", v, jnp.take(t, i, axis=0)[..., 0]),
])
def test_a_squeezed_dot_becomes_the_bag_dot(canon, f):
    work, _ = canon(f, [canon.table(n=12, d=1), IDS, V], PIPE,
                    inputs=[[canon.table(n=12, d=1, seed=5), EDGE, V]])
    (dot,) = [op for op in work.entry.ops if op.opcode == "dot"]
    assert sorted(o.type.rank for o in dot.operands) == [2, 3]
    assert tuple(dot.result.type.dims) == (3, 1)
