"""dedup: golden diff (unique + fetch loop before the nest, the lookup loop streams the slot,
the callbacks read the fetched row), one table row fetched per distinct id, bit-identical
outputs (same accumulation order) on duplicate ids, empty bags and D=1, with and without the
later passes, refusals (no clamp, already vectorized), lowered clusters of every kind."""

import numpy as np
import pass_cases as P
import pytest
import slc_examples as E

from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module


def test_golden():
    m = E.embedding_bag("sum", clamp=True)
    before, after, (rep,) = E.apply_printed(m, "dedup")
    E.check_golden("dedup.diff", E.diff_text(before, after))
    assert rep.changes == ["rows of memref<?x?xf32> fetched once per distinct id"]
    assert print_module(parse_module(after)) == after


@pytest.mark.parametrize("pipeline", ["dedup", "dedup,vectorize{vl=4},bufferize,simplify-mem",
                                      "dedup,hoist,vectorize{vl=16},bufferize,hoist"])
@pytest.mark.parametrize("dim", [1, 5])
def test_each_distinct_row_fetched_once(pipeline, dim):
    rng = np.random.default_rng(dim)
    for lengths in ([4, 0, 6, 2], [0, 0], [9]):
        x = E.bag_inputs(rng, lengths, 9, dim, weighted=True, dup=True)
        m = E.embedding_bag("sum", weighted=True, clamp=True)
        want, c0 = E.run_bag(m, x)
        _, _, reps = E.apply_printed(m, pipeline)
        assert reps[0].changes
        got, c1 = E.run_bag(m, x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, E.bag_reference(x))
        n, distinct = len(x[1]), len(np.unique(x[1]))
        assert c1["slcv.unique_rows"] == distinct and c1["slcv.unique_ids"] == n
        table_loads = c1["slcv.elements"] if "vectorize" in pipeline else (
            c1["slc.elements"] - 2 * (len(lengths)) - n - n - distinct)
        assert table_loads == distinct * dim, (c0, c1)


def test_refusals():
    m = E.embedding_bag("sum")
    before, after, (rep,) = E.apply_printed(m, "dedup")
    assert before == after and rep.refused == [
        "row stream of memref<?x?xf32>: the row index is not clamped (ids the program skips "
        "could be out of range)"]
    m = E.embedding_bag("sum", clamp=True)
    before, after, reps = E.apply_printed(m, "vectorize,dedup")
    assert not reps[1] and "before vectorize" in reps[1].refused[0]


@pytest.mark.parametrize("name", sorted(P.CASES))
def test_lowered_clusters_bit_identical(name):
    before, spec = P.lowered(name)
    after, _ = P.lowered(name)
    (rep,) = P.apply(after, "dedup")
    assert rep.changes, rep
    counts = P.equivalent(before, after, spec)
    dup = counts[2]  # the "duplicates" edge case: every id the same
    assert dup[1]["slcv.unique_rows"] <= len(spec.parts)  # one distinct id per table
    assert dup[1]["slc.elements"] < dup[0]["slc.elements"]
    P.apply(after, "vectorize{vl=4},bufferize,simplify-mem,hoist")
    P.equivalent(before, after, spec, rounds=1)
