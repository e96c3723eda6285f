"""batched-bags: a bag whose lookups have other dims than [B,P] (ids [B,F,P], a bag over a
middle axis, time-major ids [P,B] summed over axis 0, one bag of 1-D ids) becomes a [M,P,D]
bag reduced over axis 1 and reshaped back, through converts, weights, masks and jnp.take's
fill; the values are bitwise the same (the ``canon`` fixture runs both modules, edge ids
included)."""

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


# Time-major ids [P, B] summed over their leading axis: t[ids.T].sum(0).
TM_IDS = np.array([[0, 9, -1, 4, 4], [12, 3, 3, -20, 1], [1, 2, 5, 7, 0]], np.int32)
# From YNN_MIN_ELEMENTS (4096) values on, XLA:CPU splits a reduce over the leading lookup axis
# across its threads (its bits then depend on the thread count): [256, 10] ids of 64-value
# rows (163,840 values) are well past it. Such a time-major bag keeps its layout (and stays in
# XLA) for the CPU rewrite.
BIG = np.random.default_rng(5).integers(-50, 600, (256, 10)).astype(np.int32)


def _gather_feeds(work, opcode):
    g = [op for op in work.entry.ops if op.opcode == "gather"]
    assert len(g) == 1
    return [u.opcode for u in g[0].users] == [opcode]


def test_time_major_bag(canon):
    work, _ = canon(lambda t, i: t[i.T].sum(0), [canon.table(), TM_IDS], PIPE)
    red = next(op for op in work.entry.ops if op.opcode == "reduce")
    assert red.attributes["dimensions"] == [1] and _gather_feeds(work, "reduce")


def test_take_fill_lookup_keeps_its_fill(canon):
    """jnp.take (fill mode) reduced over axis 0: the fill chain is rebuilt for the transposed
    ids, so out-of-range ids still give NaN rows; then the whole thing is a fill-mode bag."""
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    def f(t, i):
        return jnp.take(t, i.T, axis=0).sum(0)

    args = [canon.table(), TM_IDS]
    work, _ = canon(f, args, PIPE)
    red = next(op for op in work.entry.ops if op.opcode == "reduce" and
               op.result.type.element_type == "f32")
    assert red.attributes["dimensions"] == [1] and red.operands[0].owner.opcode == "select"
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert [c["attributes"]["index_mode"] for c in r.clusters] == ["fill"]
    want, got = run_module(m, args)[0], run_module(r.module, args)[0]
    assert np.isnan(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_time_major_bag_at_ynnpack_size_keeps_its_layout(canon):
    work, notes = canon(lambda t, i: t[i.T].sum(0), [canon.table(500, 64), BIG],
                        PIPE)
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [0] and red.operands[0].owner.opcode == "gather"
    assert any("leading axis" in n.reason and "thread count" in n.reason for n in notes)


def test_time_major_bag_at_ynnpack_size_moves_for_the_dae_machines(canon):
    """The DAE machines add a bag's rows in order whatever XLA:CPU does (their outputs are
    compared to a tolerance), so there the bag is moved: no bitwise check against XLA."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.ir.passes import PassPipeline
    from ember_xla.rewrites.canonicalize.notes import collecting

    m = from_jax(lambda t, i: t[i.T].sum(0), canon.table(500, 64), BIG).module
    with collecting() as notes:
        PassPipeline.from_spec(
            "lookup-layout{xla_order=false},batched-bags{xla_order=false}").apply(m)
    (red,) = _bags(m)
    assert red.attributes["dimensions"] == [1] and not notes


def test_transpose_onto_the_leading_axis_keeps_its_layout(canon):
    """t[ids.T].transpose(1, 0, 2).sum(1): XLA:CPU sums the gather's [P,B] lookups over their
    leading axis, whatever the transpose says; that bag stays in XLA."""
    work, notes = canon(lambda t, i: t[i.T].transpose(1, 0, 2).sum(1),
                        [canon.table(500, 64), BIG], PIPE)
    (red,) = _bags(work)
    assert red.attributes["dimensions"] == [0] and red.operands[0].owner.opcode == "gather"
    assert any("leading axis" in n.reason for n in notes)


def test_leading_axis_bags_beside_a_rewritten_bag_are_exact():
    """Each form of a bag over the leading lookup axis, beside an ordinary bag that is
    rewritten (so the canonicalized module is what runs): every output bitwise XLA:CPU's,
    under both excess-precision settings; the leading-axis bags stay in XLA with the reason,
    the bag reduced in the gather's own order is rewritten. Before the rule the time-major
    sums came out in the blocked order, which XLA:CPU on two threads does not use."""
    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    rng = np.random.default_rng(6)
    t = (rng.standard_normal((600, 64)) * np.exp(3 * rng.standard_normal((600, 64))))
    t = t.astype(np.float32)
    ids3 = rng.integers(0, 600, (10, 64, 4)).astype(np.int32)
    forms = {
        "time_major": (lambda t, i: t[i.T].sum(0), 1),
        "time_major_mean": (lambda t, i: t[i.T].mean(0), 1),
        "flat_ids_reshaped": (lambda t, i: t[i.T.reshape(-1)].reshape(10, 256, 64).sum(0), 1),
        "transposed_back": (lambda t, i: t[i.T].transpose(1, 0, 2).sum(1), 1),
        "leading_of_three": (lambda t, i: t[ids3].sum(0), 1),
        "transposed_rows": (lambda t, i: t[i].transpose(1, 0, 2).sum(0), 2),
    }
    for name, (form, clusters) in forms.items():
        def f(t, i, form=form):
            return form(t, i), t[i].sum(1)

        m = from_jax(jax.jit(f), t, BIG).module
        r = rewrite_module(m, cost_model=False)
        assert len(r.clusters) == clusters, (name, r.near_misses)
        if clusters == 1:
            assert any("thread count" in n["reason"] for n in r.near_misses), name
        for opts in ({}, {"xla_allow_excess_precision": False}):
            got, want = run_module(r.module, [t, BIG], opts), run_module(m, [t, BIG], opts)
            for a, b in zip(got, want, strict=True):
                assert a.tobytes() == b.tobytes(), name
