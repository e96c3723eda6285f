"""simplify-mem: golden diff (one attribute on one line), gathers become contiguous loads in
the counters with the same elements and bytes, refusal when the lanes are not sequential (and
forcing ``contiguous`` there would change the numbers), lowered clusters bit-identical."""

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.dae_target.dialects import arith, slc
from ember_xla.ir.types import INDEX


def test_golden_one_attribute():
    m = E.embedding_bag("sum", weighted=True)
    E.apply_printed(m, "vectorize{vl=4},bufferize")
    before, after, (rep,) = E.apply_printed(m, "simplify-mem")
    E.check_golden("simplify_mem.diff", E.diff_text(before, after))
    assert rep.changes == ["gather from a memref<?x?xf32> -> contiguous vector load"]


def test_counters_gathers_to_contiguous_loads():
    rng = np.random.default_rng(1)
    x = E.bag_inputs(rng, [3, 0, 5], 8, 7)
    m = E.embedding_bag()
    E.apply_printed(m, "vectorize{vl=4}")
    want, c0 = E.run_bag(m, x)
    E.apply_printed(m, "simplify-mem")
    got, c1 = E.run_bag(m, x)
    np.testing.assert_array_equal(got, want)
    assert c0["slcv.gathers"] == c1["slcv.contiguous"] == 8 * 2 and not c1["slcv.gathers"]
    for k in ("slcv.elements", "slcv.bytes", "slcv.vectors"):
        assert c0[k] == c1[k]


def test_not_sequential_left_alone():
    m = E.embedding_bag()
    E.apply_printed(m, "vectorize{vl=4}")
    loop = next(op for op in m.walk() if op.opcode == "slcv.for")
    g = m.entry
    two = g.insert(0, arith.ConstantOp.create([], [INDEX], {"value": 2})).result
    loop.set_operand(2, g.insert(1, slc.ToStreamOp.create([two], [slc.INDEX_STREAM])).result)
    before, after, (rep,) = E.apply_printed(m, "simplify-mem")
    assert before == after and rep.refused == [
        "gather from a memref<?x?xf32>: lanes not sequential"]
    rng = np.random.default_rng(2)
    x = E.bag_inputs(rng, [2, 3], 5, 8)
    want, _ = E.run_bag(m, x)
    stream = next(op for op in m.walk() if op.opcode == "slcv.mem_stream")
    stream.attributes["contiguous"] = True  # wrong on purpose: the numbers change
    got, _ = E.run_bag(m, x)
    assert not np.array_equal(got, want)


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_lowered_clusters_bit_identical(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    _, rep = P.apply(after, "vectorize{vl=8},simplify-mem")
    assert rep.changes and not rep.refused, rep
    P.equivalent(before, after, spec)


def test_computed_sequential_index_vectorized_and_contiguous():
    """Row column ``k + 0`` (an alu stream on the loop index): vectorize makes it an
    slcv.alu_stream, simplify-mem still sees sequential lanes."""
    rng = np.random.default_rng(4)
    x = E.bag_inputs(rng, [4, 0, 3], 6, 7)
    m = E.embedding_bag(shifted=True)
    want, _ = E.run_bag(m, x)
    _, after, reps = E.apply_printed(m, "vectorize{vl=4},bufferize,simplify-mem")
    assert '"slcv.alu_stream"(%kv, ' in after and "contiguous = true" in after
    assert all(r.changes for r in reps)
    got, c = E.run_bag(m, x)
    np.testing.assert_array_equal(got, want)
    assert c["slcv.alu"] == 7 * 2 and c["slcv.contiguous"] == 7 * 2 and not c["slcv.gathers"]
