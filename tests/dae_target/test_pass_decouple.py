"""``decouple`` (SLC/SLCV -> DLC): the structure of the decoupled embedding bag (three TUs, the
id stream chained into the row stream, operands and tokens on the right events, the row buffer
at the end of the vector TU), that it changes nothing it cannot express, and that the DLC
interpreter gives what the SLC interpreter and numpy give."""

from __future__ import annotations

import numpy as np
import pytest
from slc_examples import bag_inputs, bag_reference, embedding_bag, run_bag

import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)
from ember_xla.dae_target.dialects import arith
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.interp.dlc import counts
from ember_xla.ir.parser import parse_module
from ember_xla.ir.passes import parse_pipeline
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module


def run_pipeline(m, pipeline: str):
    reports = []
    for p in parse_pipeline(pipeline):
        reports.append(p.apply(m))
        verify_generic_module(m)
    text = print_module(m)
    assert print_module(parse_module(text)) == text  # print -> parse -> print fixed point
    return reports


def ops(m, opcode):
    return [op for op in m.walk() if op.opcode == opcode]


def test_bag_o0_structure():
    m = embedding_bag()
    (rep,) = run_pipeline(m, "decouple")
    assert rep and "2 case(s)" in rep.changes[0] and not rep.refused
    assert not [op for op in m.walk() if op.opcode.startswith(("slc.for", "slc.callback"))]
    tb, tj, tk = ops(m, "dlc.new_tu")
    assert tb.parent_tu is None and tj.parent_tu is tb.result and tk.parent_tu is tj.result
    ivs = {op.operands[0].owner: op.result for op in ops(m, "dlc.get_ind_var")}
    off_lo, off_hi, idx, row = ops(m, "slc.mem_stream")
    assert tj.bounds[:2] == [off_lo.result, off_hi.result]          # j in [off[b], off[b+1])
    assert idx.operands[1] is ivs[tj]                                # ids[j]
    assert row.operands[1] is idx.result and row.operands[2] is ivs[tk]  # table[ids[j], k]
    regs = [(op.opcode.split("_")[1], op.tu.owner, op.event,
             op.operands[1] if len(op.operands) > 1 else op.attributes["id"])
            for op in ops(m, "dlc.register_operand") + ops(m, "dlc.register_callback")]
    b = ivs[tb]
    assert ("operand", tj, "begin", b) in regs and ("callback", tj, "begin", 0) in regs
    for s in (b, ivs[tk], row.result):
        assert ("operand", tk, "iter", s) in regs
    assert ("callback", tk, "iter", 1) in regs
    (loop,) = ops(m, "dlc.compute_loop")
    assert loop.cases == [0, 1]
    assert [op.result.type for op in loop.case(1).ops if op.opcode == "dlc.pop_operand"] == [
        b.type.elem, ivs[tk].type.elem, row.result.type.elem]


def test_bag_o2_row_buffer_at_the_vector_tu_end():
    m = embedding_bag()
    run_pipeline(m, "vectorize{vl=4},bufferize,decouple")
    tk = next(op for op in ops(m, "dlc.new_tu") if op.vl == 4)
    (vrow,) = ops(m, "slcv.mem_stream")
    b = ops(m, "dlc.get_ind_var")[0].result
    regs = [op for op in ops(m, "dlc.register_operand") if op.tu is tk.result]
    assert [(r.event, r.operands[1]) for r in regs] == [("end", vrow.result), ("end", b)]
    (cb,) = [op for op in ops(m, "dlc.register_callback") if op.tu is tk.result]
    assert cb.event == "end"
    (loop,) = ops(m, "dlc.compute_loop")
    pops = [op.result.type for op in loop.case(cb.attributes["id"]).ops
            if op.opcode == "dlc.pop_operand"]
    assert [str(t) for t in pops] == ["memref<?xf32>", "index"]  # the row, the output row
    assert not ops(m, "slcv.buf_stream") and not ops(m, "slcv.to_buffer")


PIPELINES = ["decouple", "vectorize{vl=4},decouple", "vectorize{vl=8},bufferize,decouple",
             "vectorize{vl=8},bufferize,queue-align,simplify-mem,decouple",
             "queue-align,vectorize{vl=16},bufferize,simplify-mem,hoist,decouple"]
BAGS = [([3, 0, 2, 5], 10, 13), ([0], 3, 4), ([], 3, 4), ([5, 1], 4, 1), ([9], 2, 8)]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("combiner,weighted", [("sum", False), ("max", True)])
def test_dlc_equals_slc_and_numpy(pipeline, combiner, weighted):
    rng = np.random.default_rng(3)
    slc = embedding_bag(combiner, weighted)
    dlc = embedding_bag(combiner, weighted)
    run_pipeline(dlc, pipeline)
    assert ops(dlc, "dlc.compute_loop") and not ops(dlc, "slc.callback")
    for lengths, rows, dim in BAGS:
        inputs = bag_inputs(rng, lengths, rows, dim, weighted=weighted, dup=True)
        want, c_slc = run_bag(slc, inputs)
        got, c_dlc = run_bag(dlc, inputs)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, bag_reference(inputs, combiner))
        if pipeline == "decouple":  # same loads and callbacks as the sequential program
            assert counts(c_dlc)["stream_elements"] == c_slc["slc.elements"]
            assert counts(c_dlc)["dlc.tokens"] == c_slc["slc.callbacks"]


def test_o3_counts_equal_the_handwritten_program():
    rng = np.random.default_rng(5)
    m = embedding_bag()
    run_pipeline(m, "vectorize{vl=8},bufferize,queue-align,simplify-mem,decouple")
    for lengths, rows, dim in BAGS:
        inputs = bag_inputs(rng, lengths, rows, dim)
        got, c = run_bag(m, inputs)
        want, c_hand = run_bag(sum_bag_dlc(vl=8), inputs)
        np.testing.assert_array_equal(got, want)
        keys = ("dlc.tokens", "dlc.queue_entries", "dlc.queue_bytes", "dlc.buffers",
                "stream_elements", "stream_bytes", "dlc.tu_iterations")
        assert {k: counts(c)[k] for k in keys} == {k: counts(c_hand)[k] for k in keys}


def test_left_alone_when_not_expressible():
    m = embedding_bag()
    loop = next(op for op in m.walk() if op.opcode == "slc.for")
    one = next(op for op in m.entry.ops if op.opcode == "arith.constant")
    # a core op between the streams of a loop body: the access engine cannot run it
    loop.body.insert(0, arith.AddIOp.create([one.result, one.result], [one.result.type]))
    before = print_module(m)
    (rep,) = [p.apply(m) for p in parse_pipeline("decouple")]
    assert not rep and "arith.addi in a loop body" in rep.refused[0]
    assert print_module(m) == before


def test_carried_value_updated_by_set_var():
    """A carried value yielded as anything but ``+ 1`` becomes ``dlc.set_var``."""
    m = embedding_bag()
    run_pipeline(m, "queue-align")
    root = next(op for op in m.entry.ops if op.opcode == "slc.for")
    bump = root.body.ops[-2]
    add = bump.body.ops[0]
    minus_one = m.entry.insert(0, arith.ConstantOp.create([], [add.result.type], {"value": -1}))
    sub = arith.SubIOp.create([add.operands[0], minus_one.result], [add.result.type])
    bump.body.insert_before(add, sub)
    add.results[0].replace_all_uses_with(sub.result)
    bump.body.erase(add)
    (rep,) = run_pipeline(m, "decouple")
    assert rep and not ops(m, "dlc.increment_var")
    (sv,) = ops(m, "dlc.set_var")
    assert sv.attributes["name"] == "row" and sv.operands[0].owner.opcode == "arith.subi"
    rng = np.random.default_rng(11)
    for lengths, rows, dim in BAGS:
        inputs = bag_inputs(rng, lengths, rows, dim)
        np.testing.assert_array_equal(run_bag(m, inputs)[0], bag_reference(inputs))
