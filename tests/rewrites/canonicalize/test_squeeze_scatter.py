"""squeeze-scatter: the transpose of a vmapped scalar lookup (a scatter of [1, D] windows at
clamp(0, concatenate(i, 0), [V-1, 0])) becomes the canonical row scatter, bit-identical for
in-range, negative and out-of-range ids, duplicates included; scatters whose column start is
not provably 0 are left alone."""

import numpy as np


def _grad_of_vmapped(t, ids, w):
    import jax

    def loss(t):
        rows = jax.vmap(jax.vmap(lambda i: t[i]))(ids)        # equinox's Embedding under vmap
        return ((rows * w[..., None]).sum(1) ** 2).sum()
    return jax.grad(loss)(t)


def _scatters(work):
    return [op for op in work.entry.ops if op.opcode == "scatter"]


def test_vmapped_lookup_transpose_becomes_a_row_scatter(canon):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 10, (3, 5)).astype(np.int32)
    ids[1, :] = ids[1, 0]                                        # one row repeated in a bag
    edge = ids.copy()
    edge[0, :4] = [-1, 10, 37, -30]                              # wrap, past the end, far out
    w = rng.standard_normal((3, 5)).astype(np.float32)
    work, notes = canon(_grad_of_vmapped, [canon.table(), ids, w],
                        "squeeze-gather,squeeze-scatter",
                        inputs=[[canon.table(seed=2), edge, w]])
    (sc,) = _scatters(work)
    dn = sc.attributes["scatter_dimension_numbers"]
    assert dn["inserted_window_dims"] == [0] and dn["update_window_dims"] == [2]
    assert dn["scatter_dims_to_operand_dims"] == [0] and not notes
    assert tuple(sc.operands[2].type.dims) == (3, 5, 4)          # the [.., 1, D] window is gone
    assert sc.operands[1].owner.opcode == "clamp"                 # dynamic_slice's clamp kept


def test_window_not_at_column_zero_is_left_alone(canon):
    import jax

    def f(t, ids):  # the transpose of a [1, 2] window at column 1: not a row scatter
        def loss(t):
            return (jax.vmap(lambda i: jax.lax.dynamic_slice(t, (i, 1), (1, 2))[0])(ids) ** 2).sum()
        return jax.grad(loss)(t)

    work, _ = canon(f, [canon.table(), np.array([1, 4, 9], np.int32)], "squeeze-scatter")
    (sc,) = _scatters(work)
    assert not sc.attributes["scatter_dimension_numbers"].get("inserted_window_dims")
