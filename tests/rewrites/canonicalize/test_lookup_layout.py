"""lookup-layout: reshapes/transposes of looked-up rows that only rearrange lookups move onto
the indices, and a bag reduced over axis 0 becomes one reduced over axis 1; out-of-range and
negative ids included, outputs bitwise equal (the reduce's own order is unchanged: same
elements along the same reduced axis)."""

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


def test_time_major_bag(canon):
    work, _ = canon(lambda t, i: t[i.T].sum(0), [canon.table(), IDS], "lookup-layout")
    red = next(op for op in work.entry.ops if op.opcode == "reduce")
    assert red.attributes["dimensions"] == [1] and _gather_feeds(work, "reduce")


def test_transpose_moving_d_is_left_alone(canon):
    import jax.numpy as jnp

    work, _ = canon(lambda t, i: jnp.transpose(t[i], (0, 2, 1)).sum(2),
                    [canon.table(), IDS], "lookup-layout")
    assert _gather_feeds(work, "transpose")


def test_take_fill_lookup_keeps_its_fill(canon):
    """jnp.take (fill mode) reduced over axis 0: the fill chain is rebuilt for the transposed
    ids, so out-of-range ids still give NaN rows; then the whole thing is a fill-mode bag."""
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    def f(t, i):
        return jnp.take(t, i.T, axis=0).sum(0)

    args = [canon.table(), IDS]
    work, _ = canon(f, args, "inline-calls,lookup-layout")
    red = next(op for op in work.entry.ops if op.opcode == "reduce" and
               op.result.type.element_type == "f32")
    assert red.attributes["dimensions"] == [1] and red.operands[0].owner.opcode == "select"
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert [c["attributes"]["index_mode"] for c in r.clusters] == ["fill"]
    want, got = run_module(m, args)[0], run_module(r.module, args)[0]
    assert np.isnan(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
