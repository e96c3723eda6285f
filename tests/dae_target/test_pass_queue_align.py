"""``queue-align``: the output row index stops travelling through the queue. At SLC level the
bag loop carries ``%row`` (init ``lb``) bumped by an end-of-iteration callback (Ember's
eb_slc_O3.mlir); after ``decouple`` it is the core variable ``row`` (``dlc.get_var`` /
``dlc.increment_var``) and no queue entry carries the bag index any more."""

from __future__ import annotations

import numpy as np
import pytest
from slc_examples import bag_inputs, bag_reference, embedding_bag, run_bag

import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)
from ember_xla.dae_target.dialects import slc
from ember_xla.dae_target.interp.dlc import counts
from ember_xla.ir.passes import parse_pipeline
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module

BAGS = [([3, 0, 2, 5], 10, 13), ([0, 0], 3, 4), ([], 3, 4), ([4, 1], 4, 1)]


def apply(m, pipeline):
    reports = []
    for p in parse_pipeline(pipeline):
        reports.append(p.apply(m))
        verify_generic_module(m)
    return reports


def ops(m, opcode):
    return [op for op in m.walk() if op.opcode == opcode]


def test_slc_form():
    m = embedding_bag()
    (rep,) = apply(m, "queue-align")
    assert rep and "2 read(s)" in rep.changes[0], str(rep)
    root = next(op for op in m.entry.ops if op.opcode == "slc.for")
    b, row = root.body.args
    assert row.name_hint == "row" and root.init[0].owner.attributes["value"] == 0
    assert not [u for u, _ in b.uses if u.opcode == "slc.from_stream"]
    bump, term = root.body.ops[-2:]
    assert bump.opcode == "slc.callback" and term.operands == [bump.result]
    add = bump.body.ops[0]
    assert add.opcode == "arith.addi" and add.operands[0] is row
    assert len(row.uses) == 4  # zero the row (store), accumulate (load, store), bump


@pytest.mark.parametrize("pipeline", ["queue-align", "vectorize{vl=4},bufferize,queue-align"])
def test_same_outputs_fewer_queue_entries(pipeline):
    rng = np.random.default_rng(1)
    base = embedding_bag()
    aligned = embedding_bag()
    apply(aligned, pipeline + ",decouple")
    apply(base, pipeline.replace("queue-align", "decouple"))
    for lengths, rows, dim in BAGS:
        inputs = bag_inputs(rng, lengths, rows, dim)
        a, ca = run_bag(aligned, inputs)
        b, cb = run_bag(base, inputs)
        np.testing.assert_array_equal(a, bag_reference(inputs))
        np.testing.assert_array_equal(a, b)
        # every case that read the bag index popped it: those entries are gone
        fewer = counts(cb)["dlc.queue_entries"] - counts(ca)["dlc.queue_entries"]
        assert fewer > 0 if lengths else fewer == 0


def test_dlc_core_counter():
    m = embedding_bag()
    apply(m, "vectorize{vl=8},bufferize,queue-align,simplify-mem,decouple")
    (loop,) = ops(m, "dlc.compute_loop")
    assert loop.vars == ["row"] and len(loop.results) == 1
    tb = ops(m, "dlc.new_tu")[0]
    b = next(op.result for op in ops(m, "dlc.get_ind_var") if op.operands[0] is tb.result)
    assert not [op for op in ops(m, "dlc.register_operand") if op.operands[1] is b]
    inc = ops(m, "dlc.increment_var")
    assert len(inc) == 1 and inc[0].attributes["name"] == "row"
    assert len(ops(m, "dlc.get_var")) == 2  # zero the row, add a row into it
    assert not ops(m, "dlc.set_var")


def test_left_alone_when_the_core_cannot_count():
    m = embedding_bag()
    root = next(op for op in m.entry.ops if op.opcode == "slc.for")
    lb, step = root.operands[0], root.operands[2]
    moved = slc.AluStreamOp.create([lb, step], [lb.type], {"op": "sub"})
    m.entry.insert_before(root, moved)
    root.set_operand(0, moved.result)  # lb = 0 - 1 computed on the access side
    before = print_module(m)
    (rep,) = apply(m, "queue-align")
    assert not rep and "lower bound or step is not a core value" in rep.refused[0]
    assert print_module(m) == before


@pytest.mark.parametrize("before", ["decouple", "vectorize{vl=4},bufferize,decouple"])
def test_dlc_level_same_as_slc_level(before):
    """queue-align after decouple removes the same queue entries as before it."""
    rng = np.random.default_rng(2)
    late, early = embedding_bag(), embedding_bag()
    (rep,) = apply(late, before + ",queue-align")[-1:]
    assert rep and "queue entr" in rep.changes[0], str(rep)
    apply(early, before.replace("decouple", "queue-align,decouple"))
    (loop,) = ops(late, "dlc.compute_loop")
    assert loop.vars == ["row"] and len(ops(late, "dlc.increment_var")) == 1
    for lengths, rows, dim in BAGS:
        inputs = bag_inputs(rng, lengths, rows, dim)
        a, ca = run_bag(late, inputs)
        b, cb = run_bag(early, inputs)
        np.testing.assert_array_equal(a, bag_reference(inputs))
        np.testing.assert_array_equal(a, b)
        keys = ("dlc.tokens", "dlc.queue_entries", "dlc.queue_bytes", "stream_elements")
        assert {k: counts(ca)[k] for k in keys} == {k: counts(cb)[k] for k in keys}


def test_dlc_level_nothing_to_do_on_the_handwritten_program():
    from ember_xla.dae_target.handwritten import sum_bag_dlc

    m = sum_bag_dlc()
    before = print_module(m)
    (rep,) = apply(m, "queue-align")
    assert not rep and not rep.refused and print_module(m) == before


@pytest.mark.parametrize("case", ["offsets_mean_bf16_weighted", "seg_sum_fill",
                                  "padded_sum_weighted"])
def test_dlc_level_on_lowered_clusters(case):
    from pass_cases import equivalent, lowered

    slc_m, spec = lowered(case)
    m = slc_m.clone()
    reports = apply(m, "vectorize{vl=4},bufferize,decouple,queue-align")
    assert reports[-1], str(reports[-1])
    assert not ops(m, "slc.for")
    equivalent(slc_m, m, spec, rounds=1)
