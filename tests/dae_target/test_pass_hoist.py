"""hoist: golden (only moves: the same lines leave the loops and reappear before them),
access-side alu/to_stream streams out of nested loops (fewer alu evaluations), loads reported
and never hoisted, bit-identical outputs on lowered clusters alone and after the O3 passes."""

import collections

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.dae_target.dialects import slc


def test_golden_core_side_moves_only():
    m = E.embedding_bag("sum", weighted=True)
    E.apply_printed(m, "vectorize{vl=4},bufferize")
    before, after, (rep,) = E.apply_printed(m, "hoist")
    removed, added = [], []
    for r, a in E.hunks(before, after):
        removed += r
        added += a
    assert collections.Counter(removed) == collections.Counter(added)  # moves, nothing else
    E.check_golden("hoist.moved", "\n".join(sorted(set(added))) + "\n")
    # (the fill loop's zero is a vector constant before its loop already: 4 moves, not 5)
    assert len(rep.changes) == 4 and all("out of scf.for" in c for c in rep.changes)
    rng = np.random.default_rng(0)
    x = E.bag_inputs(rng, [2, 0, 3], 5, 6, weighted=True)
    got, _ = E.run_bag(m, x)
    np.testing.assert_array_equal(got, E.bag_reference(x))


def _with_invariants():
    """The bag with an invariant alu stream (d + 1) and an invariant load (offsets[0]) put
    inside the row loop (alive: a callback reads them)."""
    m = E.embedding_bag()
    row = next(op for op in m.walk() if op.opcode == "slc.for" and op.iv.name_hint == "k")
    s0, _sd, s1 = row.operands
    g = m.entry
    off = g.args[0]
    alu = row.body.insert(0, slc.AluStreamOp.create([s0, s1], [slc.INDEX_STREAM], {"op": "add"}))
    load = row.body.insert(1, slc.MemStreamOp.create([off, s0], [slc.INDEX_STREAM]))
    cb = next(op for op in row.body.ops if op.opcode == "slc.callback")
    for s in (alu.result, load.result):
        cb.body.insert(0, slc.FromStreamOp.create([s], [s.type.elem]))
    return m, alu, load


def test_access_side_streams_leave_every_loop():
    m, alu, load = _with_invariants()
    rng = np.random.default_rng(3)
    x = E.bag_inputs(rng, [3, 1, 0, 2], 5, 4)
    want, c0 = E.run_bag(m, x)
    _, _, (rep,) = E.apply_printed(m, "hoist")
    assert alu.parent is m.entry  # out of the k, j and b loops
    assert load.parent_op is not None and load.parent_op.iv.name_hint == "k"
    assert rep.changes.count("slc.alu_stream out of slc.for") == 3
    assert rep.refused == ["invariant slc.mem_stream in slc.for (a load)"]
    got, c1 = E.run_bag(m, x)
    np.testing.assert_array_equal(got, want)
    assert c0["slc.alu"] - c1["slc.alu"] == 6 * 4 - 1  # once instead of per row element


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_lowered_clusters_bit_identical(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    P.apply(after, "hoist")
    P.equivalent(before, after, spec, rounds=1)
    P.apply(after, "vectorize{vl=4},bufferize,simplify-mem,hoist")
    P.equivalent(before, after, spec, rounds=1)
