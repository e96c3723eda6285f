"""lookup-layout: reshapes/transposes of looked-up rows that only rearrange lookups move onto
the indices, and a transpose right before a sum is dropped; out-of-range and negative ids
included, outputs bitwise equal (the reduce's own order is unchanged: same elements along the
same reduced axis). Time-major bags (a sum over the leading lookup axis) are batched-bags'
(test_batched_bags.py)."""

import numpy as np
import pytest

IDS = np.array([[0, 9, -1, 4, 4], [12, 3, 3, -20, 1], [1, 2, 5, 7, 0]], np.int32)


def _gather_feeds(work, opcode):
    g = [op for op in work.entry.ops if op.opcode == "gather"]
    assert len(g) == 1
    return [u.opcode for u in g[0].users] == [opcode]


def test_reshape_of_flat_lookup(canon):
    work, _ = canon(lambda t, i: t[i.reshape(-1)].reshape(3, 5, 4).sum(1),
                    [canon.table(), IDS], "lookup-layout")
    assert _gather_feeds(work, "reduce")


def test_transpose_of_rows_keeping_d_last(canon):
    import jax.numpy as jnp

    work, _ = canon(lambda t, i: jnp.transpose(t[i.T], (1, 0, 2)).max(1),
                    [canon.table(), IDS], "lookup-layout")
    assert _gather_feeds(work, "reduce") and "transpose" in canon.opcodes(work)


def test_transpose_moving_d_is_left_alone(canon):
    import jax.numpy as jnp

    work, _ = canon(lambda t, i: jnp.transpose(t[i], (0, 2, 1)).sum(2),
                    [canon.table(), IDS], "lookup-layout")
    assert _gather_feeds(work, "transpose")


# From YNN_MIN_ELEMENTS (4096) values on, XLA:CPU sums looked-up rows in the gather's own
# lookup order, and splits a reduce over the leading lookup axis across its threads (its bits
# then depend on the thread count): [256, 10] ids of 64-value rows (163,840 values) are well
# past it. Such a time-major bag keeps its layout (and stays in XLA) for the CPU rewrite.
BIG = np.random.default_rng(5).integers(-50, 600, (256, 10)).astype(np.int32)


def _reduces(work):
    return [op for op in work.entry.ops
            if op.opcode == "reduce" and op.result.type.element_type == "f32"]


def test_transposed_rows_are_summed_in_the_gathers_own_order(canon):
    """t[ids].transpose(1, 0, 2).sum(0): XLA:CPU sums the gather's [B,P] lookups over P, so
    the reduce reads the gather directly, over axis 1, and no transpose reaches the ids."""
    work, notes = canon(lambda t, i: t[i].transpose(1, 0, 2).sum(0),
                        [canon.table(500, 64), BIG], "lookup-layout")
    (red,) = _reduces(work)
    assert red.attributes["dimensions"] == [1] and red.operands[0].owner.opcode == "gather"
    assert "transpose" not in canon.opcodes(work) and not notes


def test_slices_of_one_lookup_become_one_lookup_each(canon):
    """Two features' ids concatenated into one lookup, pooled apart (sum of the first 2
    positions, max of the rest, every other batch row): each slice of the rows is a lookup of
    the same slice of the ids, which the reduce reads directly."""
    import jax.numpy as jnp

    def f(t, a, b):
        r = t[jnp.concatenate([a, b], 1)]
        return r[:, :2].sum(1), r[::2, 2:].max(1)

    work, _ = canon(f, [canon.table(), IDS[:, :2], IDS[:, 2:]], "lookup-layout",
                    inputs=[[canon.table(seed=1), -IDS[:, :2], IDS[:, 2:] + 7]])
    reds = _reduces(work)
    assert len(reds) == 2 and all(r.operands[0].owner.opcode == "gather" for r in reds)
    assert not any(op.opcode == "slice" and op.result.type.element_type == "f32"
                   for op in work.entry.ops)


def test_slice_within_rows_or_of_rows_reaching_no_sum_stays(canon):
    """A slice of D (part of each row) is not a choice of lookups; rows that reach no sum
    (returned as they are) keep their single lookup."""
    work, _ = canon(lambda t, i: t[i][:, :, 1:3].sum(1), [canon.table(), IDS], "lookup-layout")
    assert any(op.opcode == "slice" and op.result.type.element_type == "f32"
               for op in work.entry.ops)
    work, _ = canon(lambda t, i: t[i][:, 1:], [canon.table(), IDS], "lookup-layout")
    assert [op.opcode for op in work.entry.ops].count("gather") == 1
    assert any(op.opcode == "slice" and op.result.type.element_type == "f32"
               for op in work.entry.ops)


def test_pooled_slices_of_one_lookup_are_bags_bit_equal():
    """Through the pipeline: two padded bags, each bit-equal to XLA:CPU under both
    precision settings on in-range and out-of-range ids."""
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    rng = np.random.default_rng(9)
    t = rng.standard_normal((3000, 64)).astype(np.float32)
    ids = rng.integers(0, 3000, (256, 20)).astype(np.int32)

    def f(t, i):
        r = t[i]
        return jnp.concatenate([r[:, :8].sum(1), r[:, 8:].mean(1)], 1)

    m = from_jax(f, t, ids).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["padded_bag", "padded_bag"], r.near_misses
    for x in ([t, ids], [t, ids * 3 - 4000]):
        for opts in ({}, {"xla_allow_excess_precision": False}):
            assert run_module(r.module, x, opts)[0].tobytes() == \
                run_module(m, x, opts)[0].tobytes()


@pytest.mark.parametrize("opt", ["none", "sgd"])
def test_training_step_over_slices_of_one_lookup(opt):
    """The forward slices become bags, and the lookup's gradient (a scatter at all the
    concatenated ids) is still paired with the gathers of their slices: scatter_grad, or the
    fused SGD update; bit-equal under both precision settings, out-of-range ids included."""
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    rng = np.random.default_rng(4)
    t = rng.standard_normal((500, 16)).astype(np.float32)
    a, b = (rng.integers(0, 500, (64, k)).astype(np.int32) for k in (3, 5))

    def loss(t, a, b):
        r = t[jnp.concatenate([a, b], 1)]
        return (r[:, :3].sum(1) * r[:, 3:].mean(1)).sum()

    def step(t, a, b):
        g = jax.grad(loss)(t, a, b)
        return g if opt == "none" else t - 0.1 * g

    m = from_jax(step, t, a, b).module
    r = rewrite_module(m, cost_model=False)
    found = sorted((c["kind"], c.get("optimizer")) for c in r.clusters)
    assert found == [("padded_bag", None), ("padded_bag", None),
                     ("scatter_grad", None if opt == "none" else "sgd")], r.near_misses
    for x in ([t, a, b], [t, a * 3 - 700, b - 250]):
        for opts in ({}, {"xla_allow_excess_precision": False}):
            assert run_module(r.module, x, opts)[0].tobytes() == \
                run_module(m, x, opts)[0].tobytes()
