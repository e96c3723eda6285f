"""split-shared-lookup: one lookup feeding two bag reductions gets a copy per reduction (with
its index arithmetic); rows that also escape to a non-reduction keep the original there and
give the reduction a copy; a broadcast mask a bag shares with other code is copied for the
bag."""

import numpy as np


def _gathers(module):
    return [op for op in module.entry.ops if op.opcode == "gather"]


def test_lookup_feeding_sum_and_max_is_split(canon):
    import jax

    def f(t, i, s):
        rows = t[i]  # inline negative-index wrap + gather
        return (jax.ops.segment_sum(rows, s, num_segments=3),
                jax.ops.segment_max(rows, s, num_segments=3))

    args = [canon.table(), np.array([0, 9, -1, 12, 3], np.int32),
            np.array([0, 2, 2, 5, -1], np.int32)]
    work, _ = canon(f, args, "split-shared-lookup")
    gs = _gathers(work)
    assert len(gs) == 2 and all(len(g.result.uses) == 1 for g in gs)
    assert gs[0].operands[1] is not gs[1].operands[1]       # index chain copied too


def test_padded_bag_sum_and_max_is_split(canon):
    def f(t, ids):
        rows = t[ids]
        return rows.sum(1), rows.max(1)

    ids = np.array([[0, 9, -1], [12, 3, 3]], np.int32)
    work, _ = canon(f, [canon.table(), ids], "split-shared-lookup")
    assert len(_gathers(work)) == 2


def test_escaping_rows_give_the_reduction_a_copy(canon):
    import jax

    def f(t, i, s):
        rows = t[i]
        return jax.ops.segment_sum(rows, s, num_segments=3), rows * 2.0

    args = [canon.table(), np.array([0, 9, 3], np.int32), np.array([0, 2, 1], np.int32)]
    work, _ = canon(f, args, "split-shared-lookup")
    gs = _gathers(work)
    assert len(gs) == 2 and all(len(g.result.users) == 1 for g in gs)
    assert sorted(g.result.users[0].opcode for g in gs) == ["multiply", "scatter"]


def test_rows_without_a_reduction_are_not_copied(canon):
    def f(t, i):
        rows = t[i]
        return rows * 2.0, rows + 1.0

    work, _ = canon(f, [canon.table(), np.array([0, 9, 3], np.int32)], "split-shared-lookup")
    assert len(_gathers(work)) == 1


def test_mask_shared_with_other_code_is_copied_for_the_bag(canon):
    """A training step's backward selects the gradient rows with the forward's broadcast
    mask; the bag's select gets its own copy of the broadcast chain, the other user keeps it."""
    import jax
    import jax.numpy as jnp

    def f(t, ids, m, g):
        keep = jnp.broadcast_to(m[..., None], ids.shape + (t.shape[1],))
        return jnp.where(keep, t[ids], 0).sum(1), jnp.where(keep, g, 0)

    ids = np.array([[0, 9, -1], [12, 3, 3]], np.int32)
    m = np.array([[True, False, True], [True, True, False]])
    g = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    work, _ = canon(jax.jit(f), [canon.table(), ids, m, g], "inline-calls,split-shared-lookup")
    selects = [op for op in work.entry.ops if op.opcode == "select"
               and op.operands[0].type.rank == 3]
    assert len(selects) == 2
    a, b = (s.operands[0].owner for s in selects)
    assert a is not b and a.opcode == b.opcode == "broadcast"
    assert all(len(x.result.users) == 1 for x in (a, b))
