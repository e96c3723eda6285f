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


# From YNN_MIN_ELEMENTS (4096) values on, XLA:CPU sums looked-up rows in the gather's own
# lookup order, and splits a reduce over the leading lookup axis across its threads (its bits
# then depend on the thread count): [256, 10] ids of 64-value rows (163,840 values) are well
# past it. Such a time-major bag keeps its layout (and stays in XLA) for the CPU rewrite.
BIG = np.random.default_rng(5).integers(-50, 600, (256, 10)).astype(np.int32)


def _reduces(work):
    return [op for op in work.entry.ops
            if op.opcode == "reduce" and op.result.type.element_type == "f32"]


def test_time_major_bag_at_ynnpack_size_keeps_its_layout(canon):
    work, notes = canon(lambda t, i: t[i.T].sum(0), [canon.table(500, 64), BIG],
                        "lookup-layout")
    (red,) = _reduces(work)
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
        PassPipeline.from_spec("lookup-layout{xla_order=false}").apply(m)
    (red,) = _reduces(m)
    assert red.attributes["dimensions"] == [1] and not notes


def test_transposed_rows_are_summed_in_the_gathers_own_order(canon):
    """t[ids].transpose(1, 0, 2).sum(0): XLA:CPU sums the gather's [B,P] lookups over P, so
    the reduce reads the gather directly, over axis 1, and no transpose reaches the ids."""
    work, notes = canon(lambda t, i: t[i].transpose(1, 0, 2).sum(0),
                        [canon.table(500, 64), BIG], "lookup-layout")
    (red,) = _reduces(work)
    assert red.attributes["dimensions"] == [1] and red.operands[0].owner.opcode == "gather"
    assert "transpose" not in canon.opcodes(work) and not notes


def test_transpose_onto_the_leading_axis_keeps_its_layout(canon):
    """t[ids.T].transpose(1, 0, 2).sum(1): XLA:CPU sums the gather's [P,B] lookups over their
    leading axis, whatever the transpose says; that bag stays in XLA."""
    work, notes = canon(lambda t, i: t[i.T].transpose(1, 0, 2).sum(1),
                        [canon.table(500, 64), BIG], "lookup-layout")
    (red,) = _reduces(work)
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
