"""vectorize{vl}, core side (passes/vectorize_core.py): the element loops inside callbacks —
the fill of an output row with its start value (0, -inf for max), the mean/sqrt_n finish —
become loops over masked vector chunks. Bit-identical outputs on the hand-built bag for D a
multiple of VL, not one, and below it (the interpreters fill outputs with NaN first, so a lane
the vector loop missed would show), on every lowered cluster kind at a VL that leaves tails,
the vectorized form itself (splats before the loop, a scalar select condition kept scalar),
and the loops it must leave alone, each with its reason. ~15 s."""

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.dae_target.dialects import arith, memref
from ember_xla.ir.printer import print_module
from ember_xla.ir.types import F32, I64, INDEX

FILL_CHANGE = "scf.for in a callback -> chunks of {vl} (masked vector stores)"


def _core_loops(m):
    """The scf.for loops inside callbacks and whether each still stores scalars."""
    out = []
    for op in m.walk():
        if op.opcode != "scf.for":
            continue
        p = op.parent_op
        while p is not None and p.opcode != "slc.callback":
            p = p.parent_op
        if p is not None:
            out.append(any(o.opcode == "memref.store" for o in op.walk()))
    return out


@pytest.mark.parametrize("combiner", ["sum", "max"])
@pytest.mark.parametrize("vl,dim", [(4, 5), (4, 8), (8, 3), (3, 13), (1, 2)])
def test_fill_loop_bit_identical(combiner, vl, dim):
    rng = np.random.default_rng(vl * 100 + dim)
    m = E.embedding_bag(combiner)
    before = print_module(m)
    (rep,) = P.apply(m, f"vectorize{{vl={vl}}}")
    assert rep.changes[0] == FILL_CHANGE.format(vl=vl)
    assert _core_loops(m) == [False]
    text = print_module(m)
    init = "-inf" if combiner == "max" else "0.0"
    assert f'"arith.constant"() {{value = {init}}} : () -> vector<{vl}xf32>' in text
    assert text.count('"vector.maskedstore"') == 2 and before.count('"memref.store"') == 2
    for lengths in ([3, 0, 2, 4], [0, 0], [5]):
        x = E.bag_inputs(rng, lengths, 6, dim)
        got, counts = E.run_bag(m, x)
        np.testing.assert_array_equal(got, E.bag_reference(x, combiner))
        if combiner == "max" and 0 in lengths:  # an empty bag keeps its start value
            assert np.all(got[lengths.index(0)] == -np.inf)


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_every_lowered_fill_and_finish_loop_vectorized(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    n = len(_core_loops(before))
    assert n >= 1 and all(_core_loops(before))
    (rep,) = P.apply(after, "vectorize{vl=3}")
    assert rep.changes.count(FILL_CHANGE.format(vl=3)) == n, rep
    assert _core_loops(after) == [False] * n
    P.equivalent(before, after, spec, rounds=1, seed=7)


def test_finish_loop_keeps_the_empty_row_condition_scalar():
    m, _ = P.lowered("offsets_mean_bf16_weighted")
    P.apply(m, "vectorize{vl=4}")
    (sel,) = [op for op in m.walk() if op.opcode == "arith.select"
              and op.parent.parent_op.opcode == "scf.for"]
    assert str(sel.operands[0].type) == "i1" and str(sel.result.type) == "vector<4xf32>"
    loop = sel.parent.parent_op
    assert [o.opcode for o in loop.body.ops] == [
        "slcv.mask", "vector.maskedload", "arith.mulf", "arith.select", "vector.maskedstore",
        "scf.yield"]
    cb = loop.parent
    before = [o.opcode for o in cb.ops[:cb.index_of(loop)]]
    assert before.count("vector.broadcast") == 1  # the scale, once, before the loop
    # the init and the masked load's pass-through (both 0.0) are one vector constant
    assert sel.operands[1] is loop.body.ops[1].operands[-1]


def _fill_loop(m):
    loop = next(op for op in m.walk() if op.opcode == "scf.for")
    store = next(o for o in loop.body.ops if o.opcode == "memref.store")
    return loop, store


def _refused(m, reason):
    want, _ = E.run_bag(m.clone(), _INPUTS)
    (rep,) = P.apply(m, "vectorize{vl=4}")
    assert f"scf.for in a callback: {reason}" in rep.refused, rep
    assert _core_loops(m) == [True]
    got, _ = E.run_bag(m, _INPUTS)
    np.testing.assert_array_equal(got, want)


_INPUTS = E.bag_inputs(np.random.default_rng(1), [2, 0, 3], 6, 5)


def test_refuses_a_store_not_at_the_loop_index():
    m = E.embedding_bag()
    loop, store = _fill_loop(m)
    again = store.clone()
    again.set_operand(3, loop.operands[0])  # also out[b, 0] = 0 in every iteration
    loop.body.insert(loop.body.index_of(store) + 1, again)
    _refused(m, "a store inside the loop does not depend on the loop index")


def test_refuses_the_loop_index_as_a_value():
    m = E.embedding_bag()
    loop, store = _fill_loop(m)
    i = loop.body.args[0]
    as_int = loop.body.insert(0, arith.IndexCastOp.create([i], [I64]))
    val = loop.body.insert(1, arith.SIToFPOp.create([as_int.result], [F32]))
    store.set_operand(0, val.result)  # out[b, i] = float(i)
    _refused(m, "arith.index_cast uses the loop index as a value")


def test_refuses_a_fixed_element_of_the_row_it_writes():
    m = E.embedding_bag()
    loop, store = _fill_loop(m)
    row, c0 = store.operands[2], loop.operands[0]
    at = loop.body.index_of(store)
    first = loop.body.insert(at, memref.LoadOp.create([store.operands[1], row, c0], [F32]))
    total = loop.body.insert(at + 1, arith.AddFOp.create([first.result, store.operands[0]],
                                                         [F32]))
    store.set_operand(0, total.result)  # out[b, i] = out[b, 0] + 0: reads what it writes
    _refused(m, "it reads a fixed element of a row it writes lane-wise")


def test_refuses_a_position_other_than_the_loop_index():
    m = E.embedding_bag()
    loop, store = _fill_loop(m)
    i = loop.body.args[0]
    one = loop.body.insert(0, arith.ConstantOp.create([], [INDEX], {"value": 0}))
    col = loop.body.insert(1, arith.AddIOp.create([i, one.result], [INDEX]))
    store.set_operand(3, col.result)  # out[b, i + 0]: computed, not the index itself
    _refused(m, "arith.addi uses the loop index as a value")
