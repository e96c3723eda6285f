"""vectorize{vl}: golden diff on the hand-built embedding bag (the row loop and the callback's
fill loop change), bit-identical outputs vs the SLC interpreter on lowered clusters of every
kind and on the edge cases (tails not a multiple of VL, VL > D, D=1, empty bags, duplicate
ids), the callback counts it saves, its options and what it leaves alone."""

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.dae_target.dialects import arith, slc
from ember_xla.dae_target.passes.slcv_util import has_nested_loop
from ember_xla.dae_target.passes.vectorize import Vectorize
from ember_xla.ir.parser import parse_module
from ember_xla.ir.passes import PipelineError, parse_pipeline
from ember_xla.ir.printer import print_module
from ember_xla.ir.types import INDEX


def test_golden_the_row_loop_and_the_fill_loop_change():
    m = E.embedding_bag("sum", weighted=True)
    before, after, (rep,) = E.apply_printed(m, "vectorize{vl=4}")
    E.check_golden("vectorize.diff", E.diff_text(before, after))
    assert rep.changes == ["scf.for in a callback -> chunks of 4 (masked vector stores)",
                           "slc.for over %k -> slcv.for<4> (bcast)"]
    assert print_module(parse_module(after)) == after


@pytest.mark.parametrize("combiner", ["sum", "max"])
@pytest.mark.parametrize("vl,dim", [(4, 5), (4, 8), (16, 5), (8, 1), (1, 3)])
def test_hand_built_bag_edge_cases(combiner, vl, dim):
    rng = np.random.default_rng(vl * 10 + dim)
    for lengths, dup in (([3, 0, 2, 4], False), ([0, 0], False), ([5, 5], True), ([], False)):
        x = E.bag_inputs(rng, lengths, 6, dim, weighted=True, dup=dup)
        m = E.embedding_bag(combiner, weighted=True)
        want, c0 = E.run_bag(m, x)
        E.apply_printed(m, f"vectorize{{vl={vl}}}")
        got, c1 = E.run_bag(m, x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, E.bag_reference(x, combiner))
        n = len(x[1])
        chunks = -(-dim // vl)
        assert c1["slcv.iterations"] == n * chunks and c1["slcv.lanes"] == n * dim
        assert c1["slcv.elements"] == c0["slc.elements"] - c1["slc.elements"] == n * dim
        assert c0["slc.callbacks"] - c1["slc.callbacks"] == n * (dim - chunks)


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_lowered_clusters_bit_identical(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    (rep,) = P.apply(after, "vectorize{vl=4}")
    assert rep.changes, rep
    scalar_rows = [op for op in after.walk() if op.opcode == "slc.for"
                   and not has_nested_loop(op.body)
                   and any(u.opcode == "slc.mem_stream" for u in op.iv.users)]
    assert not scalar_rows, "an innermost row loop was left scalar"
    P.equivalent(before, after, spec)


def test_options_from_pipeline_strings():
    (p,) = parse_pipeline("vectorize{vl=16}")
    assert p == Vectorize(vl=16)
    assert parse_pipeline("vectorize") == [Vectorize(vl=8)]
    with pytest.raises(PipelineError, match="vl"):
        parse_pipeline("vectorize{vl=wide}")
    with pytest.raises(ValueError, match="positive"):
        Vectorize(vl=0).apply(E.embedding_bag())


def test_leaves_alone_what_it_cannot_vectorize_and_says_why():
    m = E.embedding_bag()
    row = next(op for op in m.walk() if op.opcode == "slc.for" and op.iv.name_hint == "k")
    g = m.entry
    two = g.insert(0, arith.ConstantOp.create([], [INDEX], {"value": 2})).result
    s2 = g.insert(1, slc.ToStreamOp.create([two], [slc.INDEX_STREAM])).result
    row.set_operand(2, s2)
    before, after, (rep,) = E.apply_printed(m, "vectorize{vl=4}")
    assert rep.changes == ["scf.for in a callback -> chunks of 4 (masked vector stores)"]
    assert rep.refused == ["slc.for over %k: its step is not the constant 1"]
    assert "left alone: slc.for over %k" in str(rep)
    assert "slc.for" in after and "slcv.for" not in after
