"""bufferize: golden diff (row buffer, to_buffer in the loop, one row callback after it),
one callback per row instead of one per chunk, buffer counters, bit-identical outputs on the
hand-built bag's edge cases and on lowered clusters of every kind."""

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module


def test_golden_row_buffer_and_row_callback():
    m = E.embedding_bag("sum")
    E.apply_printed(m, "vectorize{vl=4}")
    before, after, (rep,) = E.apply_printed(m, "bufferize")
    E.check_golden("bufferize.diff", E.diff_text(before, after))
    assert rep.changes == ["slcv.for over %kv: 1 row buffer(s), one callback per row"]
    assert print_module(parse_module(after)) == after


@pytest.mark.parametrize("vl,dim", [(4, 5), (4, 8), (16, 3), (8, 1)])
def test_one_callback_per_row(vl, dim):
    rng = np.random.default_rng(dim)
    for lengths, dup in (([3, 0, 2, 4], False), ([0], False), ([6], True)):
        x = E.bag_inputs(rng, lengths, 6, dim, weighted=True, dup=dup)
        m = E.embedding_bag("max", weighted=True)
        E.apply_printed(m, f"vectorize{{vl={vl}}}")
        want, c0 = E.run_bag(m, x)
        E.apply_printed(m, "bufferize")
        got, c1 = E.run_bag(m, x)
        np.testing.assert_array_equal(got, want)
        n = len(x[1])
        assert c0["slc.callbacks"] - c1["slc.callbacks"] == n * (-(-dim // vl) - 1)
        assert c1["slcv.buffers"] == n and c1["slcv.buffer_elements"] == n * dim
        assert c1["slcv.buffer_bytes"] == n * dim * 4


def test_nothing_to_do_on_scalar_slc():
    m = E.embedding_bag()
    before, after, (rep,) = E.apply_printed(m, "bufferize")
    assert before == after and not rep and not rep.refused


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_lowered_clusters_bit_identical(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    _, rep = P.apply(after, "vectorize{vl=4},bufferize")
    assert rep.changes and not rep.refused, rep
    assert not any(op.opcode == "slc.callback" and op.parent_op.opcode == "slcv.for"
                   for op in after.walk())
    P.equivalent(before, after, spec)
