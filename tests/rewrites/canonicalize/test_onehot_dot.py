"""onehot-dot-to-gather: jax.nn.one_hot(ids, N) @ table becomes select(in range, gather, 0)
when the table is a finite constant or the caller vouches for it; a table parameter is a
near-miss with the reason; and the condition is real: with an Inf in the table the one-hot
product poisons the column for every lookup, which the gather does not reproduce."""

import numpy as np

IDS = np.array([[0, 3, 9], [-1, 10, 4]], np.int32)        # incl. out of range -> zero rows
EDGE = np.array([[5, 5, 5], [25, -7, 0]], np.int32)


def _lookup(t, ids):
    import jax

    return jax.nn.one_hot(ids, t.shape[0], dtype=t.dtype) @ t


def test_constant_finite_table_is_rewritten(canon):
    const = canon.table()
    work, notes = canon(lambda ids: _lookup(const, ids), [IDS], "inline-calls,"
                        "onehot-dot-to-gather", inputs=[[EDGE]])
    ops = canon.opcodes(work)
    assert "dot" not in ops and "gather" in ops and "select" in ops and not notes


def test_table_parameter_needs_the_promise(canon):
    args = [canon.table(), IDS]
    work, notes = canon(_lookup, args, "inline-calls,onehot-dot-to-gather")
    assert "dot" in canon.opcodes(work)
    assert len(notes) == 1 and "no Inf/NaN" in notes[0].reason
    work, notes = canon(_lookup, args, "inline-calls,onehot-dot-to-gather"
                        "{assume_finite_tables=true}", inputs=[[canon.table(seed=3), EDGE]])
    assert "dot" not in canon.opcodes(work) and not notes


def test_inf_in_the_table_breaks_equivalence():
    """Why the promise is needed: the two forms differ once the table holds an Inf."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.ir.passes import PassPipeline
    from ember_xla.runtime.execute import run_module

    t = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    m = from_jax(_lookup, t, IDS).module
    work = m.clone()
    PassPipeline.from_spec("inline-calls,onehot-dot-to-gather{assume_finite_tables=true}").apply(work)
    t[7, 1] = np.inf
    want, got = run_module(m, [t, IDS])[0], run_module(work, [t, IDS])[0]
    assert np.isnan(want[:, :, 1]).all()          # 0 * inf = nan in every lookup's column 1
    assert not np.isnan(got).any()


def test_constant_table_with_inf_is_not_rewritten(canon):
    const = canon.table()
    const[2, 0] = -np.inf
    work, notes = canon(lambda ids: _lookup(const, ids), [IDS],
                        "inline-calls,onehot-dot-to-gather")
    assert "dot" in canon.opcodes(work) and len(notes) == 1


def test_a_dot_with_a_non_one_hot_matrix_is_left_alone(canon):
    def f(t, ids):
        import jax.numpy as jnp

        m = (ids[..., None] <= jnp.arange(t.shape[0])).astype(t.dtype)  # not EQ: a "cumsum"
        return m @ t

    work, notes = canon(f, [canon.table(), IDS], "inline-calls,onehot-dot-to-gather")
    assert "dot" in canon.opcodes(work) and not notes


def test_multi_hot_dot_is_a_near_miss(canon):
    """einsum('bpv,vd->bd', one_hot(ids), T) sums the one-hots first (a multi-hot matrix):
    reported, not rewritten (count * row rounds differently from repeated adds)."""
    import jax
    import jax.numpy as jnp

    def f(t, ids):
        return jnp.einsum("bpv,vd->bd", jax.nn.one_hot(ids, t.shape[0]), t)

    work, notes = canon(f, [canon.table(), IDS], "inline-calls,onehot-dot-to-gather"
                        "{assume_finite_tables=true}")
    assert "dot" in canon.opcodes(work)
    assert len(notes) == 1 and "multi-hot" in notes[0].reason
