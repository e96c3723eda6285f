"""masked-bag-to-segments: where(mask, rows, identity) reduced over the bag axis becomes a
segment reduction with out-of-range ids for masked lookups -- exact, also for tables with
Inf/NaN (which a mask multiply would not be) -- and refusals are reported."""

import numpy as np
import pytest

IDS = np.array([[0, 9, -1, 4], [12, 3, 3, 3], [1, 2, 5, 7]], np.int32)
MASK = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 1]], bool)   # bag 1 all masked


def _masked(fill, reduce):
    def f(t, ids, m):
        import jax.numpy as jnp

        return getattr(jnp.where(m[..., None], t[ids], fill), reduce)(1)

    return f


def _check(canon, fill, reduce):
    t = canon.table()
    bad = canon.table(seed=5)
    bad[9, 0], bad[3, 2] = np.inf, np.nan              # masked-out rows may be Inf/NaN
    work, notes = canon(_masked(fill, reduce), [t, IDS, MASK], "inline-calls,"
                        "masked-bag-to-segments", inputs=[[bad, IDS, MASK]])
    assert "scatter" in canon.opcodes(work) and not notes
    assert "reduce" not in canon.opcodes(work)
    return work


def test_where_zero_sum(canon):
    _check(canon, 0.0, "sum")


@pytest.mark.parametrize("fill,reduce", [(-np.inf, "max"), (np.inf, "min")])
def test_masked_max_min_bags_stay_in_xla(canon, fill, reduce):
    """A max/min bag is a reduce, which XLA:CPU may offload to YNNPACK (NaN dropped), while a
    segment reduction propagates NaN (docs/RELIABILITY.md): refused with that reason."""
    work, notes = canon(_masked(fill, reduce), [canon.table(), IDS, MASK],
                        "inline-calls,masked-bag-to-segments")
    assert "scatter" not in canon.opcodes(work)
    assert any("YNNPACK" in n.reason for n in notes)


def test_masked_bag_becomes_a_segment_cluster(canon):
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    f = _masked(0.0, "sum")
    args = [canon.table(), IDS, MASK]
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert [c["kind"] for c in r.clusters] == ["segment_reduce"]
    assert run_module(r.module, args)[0].tobytes() == run_module(m, args)[0].tobytes()


def test_non_identity_fill_is_a_near_miss(canon):
    work, notes = canon(_masked(1.0, "sum"), [canon.table(), IDS, MASK],
                        "inline-calls,masked-bag-to-segments")
    assert "scatter" not in canon.opcodes(work)
    assert len(notes) == 1 and "not the identity" in notes[0].reason


def test_mask_varying_along_the_row_is_a_near_miss(canon):
    def f(t, ids, m):
        import jax.numpy as jnp

        return jnp.where(m, t[ids], 0.0).sum(1)

    m3 = np.random.default_rng(0).random((3, 4, 4)) < 0.5
    work, notes = canon(f, [canon.table(), IDS, m3], "inline-calls,masked-bag-to-segments")
    assert "scatter" not in canon.opcodes(work)
    assert len(notes) == 1 and "row dim" in notes[0].reason


def test_masked_rows_times_a_parameter_weight_is_a_near_miss(canon):
    def f(t, ids, m, w):
        import jax.numpy as jnp

        return (jnp.where(m[..., None], t[ids], 0.0) * w).sum(1)

    work, notes = canon(f, [canon.table(), IDS, MASK, np.float32(2.0)],
                        "inline-calls,masked-bag-to-segments")
    assert len(notes) == 1 and "provably finite" in notes[0].reason


def test_mask_over_take_fill(canon):
    """where(mask, jnp.take(t, ids), 0): the fill is rebuilt on the flat ids; an unmasked
    out-of-range id still gives NaN, a masked one is dropped."""
    import jax.numpy as jnp

    def f(t, ids, m):
        return jnp.where(m[..., None], jnp.take(t, ids, axis=0), 0.0).sum(1)

    work, notes = canon(f, [canon.table(), IDS, MASK], "inline-calls,masked-bag-to-segments")
    assert "scatter" in canon.opcodes(work) and not notes


def test_masked_bag_in_a_blocked_order_is_a_masked_padded_bag_on_the_cpu():
    """At YNNPACK sizes XLA:CPU adds a masked bag's rows in its blocked order, which the
    segment form does not reproduce: the pass leaves the bag to the padded bag's masked kernel
    on the CPU (bit-equality: tests/rewrites/test_masked_padded_bag.py); the DAE rewrite, which
    adds rows in order, takes it as a segment sum."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    rng = np.random.default_rng(0)
    t = rng.normal(size=(500, 16)).astype(np.float32)
    ids = rng.integers(0, 500, (64, 10)).astype(np.int32)
    mask = rng.random((64, 10)) < 0.7

    def f(t, ids, mask):
        return jnp.where(mask[..., None], t[ids], 0.0).sum(1)

    proto = jax.jit(f).lower(t, ids, mask).compiler_ir("hlo").as_serialized_hlo_module_proto()
    cpu = rewrite_for(module_from_proto(proto, "masked"), "cpu", cost_model=False)
    (c,) = cpu.clusters
    assert c["kind"] == "padded_bag" and c["attributes"]["sum_order"] == "blocked", c
    assert not any("in the order 'blocked'" in n["reason"] for n in cpu.near_misses)
    dae = rewrite_for(module_from_proto(proto, "masked"), "dae")
    assert [c["kind"] for c in dae.clusters] == ["segment_reduce"]


FLAT = np.array([0, 9, -1, 4, 12, 3, 3, 3, -13, 2, 5, 7], np.int32)   # -13, 12: out of range
SEG = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, -1, 4], np.int32)       # -1, 4: dropped


def _segment_sum_of(rows_of):
    def f(t, ids, seg):
        import jax

        return jax.ops.segment_sum(rows_of(t, ids), seg, num_segments=4)

    return f


@pytest.mark.parametrize("form", ["take_fill_zero", "where_in_bounds"])
def test_masked_segment_rows_drop_their_segment(canon, form):
    """segment_sum of jnp.take(..., mode='fill', fill_value=0) (or rows masked to 0 by
    jnp.where): the masked lookups get an out-of-range segment id; exact also for Inf/NaN
    rows, which the mask hides."""
    import jax.numpy as jnp

    def rows(t, ids):
        if form == "take_fill_zero":
            return jnp.take(t, ids, axis=0, mode="fill", fill_value=0.0)
        return jnp.where(((ids >= 0) & (ids < 10))[:, None], t[ids], 0.0)

    bad = canon.table(seed=6)
    bad[-1, 0], bad[0, 2] = np.inf, np.nan
    work, notes = canon(_segment_sum_of(rows), [canon.table(), FLAT, SEG],
                        "inline-calls,masked-bag-to-segments", inputs=[[bad, FLAT, SEG]])
    assert not notes
    (sc,) = [op for op in work.entry.ops if op.opcode == "scatter"]
    assert sc.operands[2].owner.opcode == "gather"


def test_masked_segment_rows_with_a_non_zero_fill_are_a_near_miss(canon):
    import jax.numpy as jnp

    def rows(t, ids):
        return jnp.take(t, ids, axis=0, mode="fill", fill_value=1.0)

    work, notes = canon(_segment_sum_of(rows), [canon.table(), FLAT, SEG],
                        "inline-calls,masked-bag-to-segments")
    assert len(notes) == 1 and "not no-ops" in notes[0].reason
