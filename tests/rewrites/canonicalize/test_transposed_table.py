"""transposed-table: lookups vmapped over the table's columns (penzai's named-axis indexing
emits exactly these) become the canonical row gather and, in the gradient, the canonical row
scatter, bit-identical for in-range, negative, out-of-range and duplicate ids; a table
stored column-major (no transpose to look through) is left alone."""

import numpy as np
import pytest


def _cols(t, ids):
    import jax
    return jax.vmap(lambda c: c[ids], in_axes=1, out_axes=0)(t)          # [D, B, P]


def _ids(shape=(3, 5), n=10, edge=False):
    rng = np.random.default_rng(4)
    ids = rng.integers(0, n, shape).astype(np.int32)
    ids.flat[1] = ids.flat[0]                                            # a duplicate
    if edge:
        ids.flat[:4] = [-1, n, 37, -30]                                  # wrap, past the end
    return ids


def _gathers(work):
    return [op for op in work.entry.ops if op.opcode == "gather"]


def _scatters(work):
    return [op for op in work.entry.ops if op.opcode == "scatter"]


def test_column_gather_becomes_a_transposed_row_gather(canon):
    work, notes = canon(lambda t, i: _cols(t, i) * 2.0, [canon.table(), _ids()],
                        "transposed-table", inputs=[[canon.table(seed=1), _ids(edge=True)]])
    (g,) = _gathers(work)
    dn = g.attributes["gather_dimension_numbers"]
    assert dn["start_index_map"] == [0] and dn["collapsed_slice_dims"] == [0]
    assert g.operands[0].owner.opcode == "parameter"                     # T itself, not T^T
    assert tuple(g.result.type.dims) == (3, 5, 4) and not notes


def test_penzai_unwrap_cancels_the_transpose(canon):
    import jax.numpy as jnp

    def f(t, i):  # penzai: lookup (D first), then unwrap("batch", "seq", "embedding")
        return jnp.transpose(_cols(t, i), (1, 2, 0)).mean(1)

    work, _ = canon(f, [canon.table(), _ids()], "transposed-table",
                    inputs=[[canon.table(seed=1), _ids(edge=True)]])
    (g,) = _gathers(work)
    reduce = next(op for op in work.entry.ops if op.opcode == "reduce")
    assert reduce.operands[0] is g.result                                # a [B,P,D] bag again
    assert "transpose" not in canon.opcodes(work)


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_gradient_of_column_gather_becomes_a_row_scatter(canon, dtype):
    import jax
    import jax.numpy as jnp

    def grad(t, i, y):
        def loss(t):
            s = jnp.transpose(_cols(t, i).sum(2))                          # [B, D]
            return ((s.astype(jnp.float32) - y) ** 2).sum()
        return jax.grad(loss)(t)

    t = canon.table().astype(jnp.bfloat16 if dtype == "bfloat16" else dtype)
    y = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    work, _ = canon(grad, [t, _ids(), y], "inline-calls,fold-tuple-index,transposed-table",
                    inputs=[[t, _ids(edge=True), y]])
    (sc,) = _scatters(work)
    dn = sc.attributes["scatter_dimension_numbers"]
    assert dn["inserted_window_dims"] == [0] and dn["scatter_dims_to_operand_dims"] == [0]
    assert tuple(sc.result.type.dims) == (10, 4)                          # [N, D] directly
    upd = sc.operands[2].owner
    if upd.opcode == "convert":                                          # bf16 table
        upd = upd.operands[0].owner
    assert upd.opcode == "broadcast" and upd.attributes["dimensions"] == [0, 2]


def test_a_table_stored_column_major_is_left_alone(canon):
    import jax

    def f(tt, i):  # tt [D, N] is the parameter itself: reading its rows would copy it
        return jax.grad(lambda tt: (tt[:, i] ** 2).sum())(tt)

    work, _ = canon(f, [canon.table().T.copy(), _ids()], "transposed-table",
                    inputs=[[canon.table(seed=1).T.copy(), _ids(edge=True)]])
    (g,) = _gathers(work)
    (sc,) = _scatters(work)
    assert g.attributes["gather_dimension_numbers"]["start_index_map"] == [1]
    assert sc.attributes["scatter_dimension_numbers"]["scatter_dims_to_operand_dims"] == [1]


def test_lookup_as_the_result_and_under_take_fill(canon):
    import jax
    import jax.numpy as jnp

    def f(t, i):  # the D-first rows are the module's result
        return _cols(t, i)

    work, _ = canon(f, [canon.table(), _ids()], "transposed-table",
                    inputs=[[canon.table(seed=1), _ids(edge=True)]])
    assert work.entry.root.opcode == "transpose" and len(_gathers(work)) == 1

    def g(t, i):  # jnp.take's NaN fill per column, unwrapped and summed
        cols = jax.vmap(lambda c: jnp.take(c, i), in_axes=1, out_axes=0)(t)
        return jnp.transpose(cols, (1, 2, 0)).sum(1)

    work, _ = canon(g, [canon.table(), _ids()], "inline-calls,transposed-table",
                    inputs=[[canon.table(seed=1), _ids(edge=True)]])
    reduce = next(op for op in work.entry.ops if op.opcode == "reduce"
                  and op.result.type.element_type == "f32")
    sel = reduce.operands[0].owner                                     # fill around the rows
    assert sel.opcode == "select" and sel.operands[1].owner.opcode == "gather"
