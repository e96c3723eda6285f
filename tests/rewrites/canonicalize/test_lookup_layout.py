"""lookup-layout: reshapes/transposes of looked-up rows that only rearrange lookups move onto
the indices, and a transpose right before a sum is dropped; out-of-range and negative ids
included, outputs bitwise equal (the reduce's own order is unchanged: same elements along the
same reduced axis). Time-major bags (a sum over the leading lookup axis) are batched-bags'
(test_batched_bags.py)."""

import numpy as np

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
