"""squeeze-gather: vmap of a scalar lookup (gather of [1,D] slices at concatenate(i, 0) and a
squeezing reshape) becomes the canonical row gather, for in-range and out-of-range ids."""

import numpy as np


def _vmapped(t, ids):
    import jax

    return jax.vmap(jax.vmap(lambda i: t[i]))(ids).max(1)


def test_vmapped_lookup_becomes_a_row_gather(canon):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 10, (3, 5)).astype(np.int32)
    edge = ids.copy()
    edge[0, :4] = [-1, 10, 37, -30]
    args = [canon.table(), ids]
    work, notes = canon(_vmapped, args, "squeeze-gather", inputs=[[canon.table(seed=2), edge]])
    gathers = [op for op in work.entry.ops if op.opcode == "gather"]
    assert len(gathers) == 1 and not notes
    dn = gathers[0].attributes["gather_dimension_numbers"]
    assert dn["collapsed_slice_dims"] == [0] and dn["start_index_map"] == [0]
    assert tuple(gathers[0].result.type.dims) == (3, 5, 4)
    reduce_ = next(op for op in work.entry.ops if op.opcode == "reduce")
    assert reduce_.operands[0].owner is gathers[0]  # the squeeze is gone


def test_partial_row_slices_are_left_alone(canon):
    import jax

    def f(t, ids):  # a [1,2] window of each row is not a row lookup
        return jax.vmap(lambda i: jax.lax.dynamic_slice(t, (i, 1), (1, 2))[0])(ids).sum(0)

    work, _ = canon(f, [canon.table(), np.array([1, 4, 9], np.int32)], "squeeze-gather")
    g = next(op for op in work.entry.ops if op.opcode == "gather")
    assert g.attributes["gather_slice_sizes"] == [1, 2]  # untouched
