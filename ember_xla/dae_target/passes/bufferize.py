"""``bufferize``: a whole row per queue buffer, one callback per row (Ember's
BufferCompoundTypes).

A candidate is an ``slcv.for`` (step 1, no carried values) whose body ends in one callback
that reads the loop's vector streams. Each vector stream the callback reads gets a row buffer
(``slcv.buf_stream(ub)`` before the loop, ``slcv.to_buffer`` inside it), the callback leaves
the loop and runs once after it: an ``scf.for`` over the row's chunks of ``VL`` whose body is
the old callback with ``from_stream(vector stream)`` -> ``slcv.from_buffer(buf, c)``, the tail
mask -> ``slcv.mask(c, lb, ub, step)`` and the chunk's first lane -> ``c``. The chunks run in
the same order with the same lanes, so the numbers are unchanged; the callbacks fired drop
from one per chunk to one per row. A loop left without streams is removed (its row loop now
runs on the core); a top-level loop without memory streams is left alone (its callback would
have no traversal left to fire on)."""

from __future__ import annotations

from typing import ClassVar

from ember_xla.dae_target.dialects import arith, scf, slc, slcv
from ember_xla.dae_target.passes.pattern_pass import ReportingPatternPass
from ember_xla.dae_target.passes.slcv_util import PassReport, constant_of, op_label
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.types import I1, INDEX, MemRefType
from ember_xla.ir.value import Value


def _why_not(loop: Operation) -> str | None:
    ops = loop.body.ops
    if loop.init:
        return "it carries values"
    if constant_of(loop.step) != 1:
        return "its step is not the constant 1"
    if len(ops) < 2 or ops[-2].opcode != "slc.callback" or ops[-2].results:
        return "its body does not end in one callback without results"
    if any(o.opcode == "slc.callback" for o in ops[:-2]):
        return "it has more than one callback"
    parent = loop.parent_op
    if (parent is None or parent.opcode not in ("slc.for", "slcv.for")) and not any(
            o.opcode.startswith(("slc.mem_stream", "slcv.mem_stream")) for o in ops):
        return ("a top-level loop without memory streams (bufferized, its callback would "
                "have no traversal to fire on)")
    cb = ops[-2]
    for op in cb.walk():
        if (op.opcode == "slc.from_stream" and op.parent is not cb.body
                and op.operands[0].defining_block is loop.body):
            return "its callback reads a loop stream inside a nested region"
        if op.opcode == "slc.from_stream" and op.operands[0] is loop.iv and any(
                u.opcode != "slcv.first_lane" for u in op.result.users):
            return "its callback uses the lanes of the induction variable"
    return None


class BufferizeRows(RewritePattern):
    def __init__(self, report: PassReport) -> None:
        self.report = report

    def match_and_rewrite(self, loop: Operation, rw: PatternRewriter) -> None:
        if loop.opcode != "slcv.for" or not loop.body.ops:
            return
        cb = loop.body.ops[-2] if len(loop.body.ops) > 1 else None
        if cb is None or cb.opcode != "slc.callback":
            return  # already bufferized (or nothing to do)
        reason = _why_not(loop)
        if reason:
            self.report.refuse(f"{op_label(loop)}: {reason}")
            return
        vec_streams = [op.operands[0] for op in cb.walk() if op.opcode == "slc.from_stream"
                       and op.operands[0].owner is not None
                       and getattr(op.operands[0].owner, "opcode", "") in (
                           "slcv.mem_stream", "slcv.alu_stream")
                       and op.operands[0].owner.parent is loop.body]
        bufs: dict[Value, Value] = {}
        for s in dict.fromkeys(vec_streams):
            t = slcv.stream(MemRefType((None,), s.type.elem.elem))
            buf = rw.insert_before(loop, slcv.BufStreamOp.create([loop.ub], [t])).result
            buf.name_hint = "row"
            bufs[s] = buf
            rw.insert_before(cb, slcv.ToBufferOp.create([s, buf, loop.iv, loop.mask]))
        rw.insert_after(loop, self._row_callback(loop, cb, bufs))
        rw.erase(cb)
        label = op_label(loop)
        if len(loop.body.ops) == 1:  # only the yield is left: the row loop runs on the core
            rw.erase(loop)
            self.report.change(f"{label}: no streams left, the row loop runs in one callback")
        else:
            self.report.change(f"{label}: {len(bufs)} row buffer(s), one callback per row")

    def _row_callback(self, loop: Operation, cb: Operation,
                      bufs: dict[Value, Value]) -> Operation:
        """The callback after the loop (built detached, then inserted by the caller)."""
        new_cb = slc.CallbackOp.build()
        blk = new_cb.body

        def add(op: Operation) -> Value | None:
            blk.append(op)
            return op.results[0] if op.results else None

        lb, ub, step = (add(slc.FromStreamOp.create([v], [INDEX]))
                        for v in (loop.lb, loop.ub, loop.step))
        # a chunk is step * VL elements; the step is the constant 1 (_why_not): VL, a constant
        chunk = add(arith.ConstantOp.create([], [INDEX], {"value": loop.vl}))
        mems = {s: add(slc.FromStreamOp.create([b], [b.type.elem])) for s, b in bufs.items()}
        rows = blk.append(scf.ForOp.build(lb, ub, chunk))
        body = rows.body
        c = body.args[0]
        c.name_hint = "c"
        mask = body.append(slcv.MaskOp.create([c, lb, ub, step], [slcv.vec(loop.vl, I1)]))
        vmap: dict[Value, Value] = {}
        for op in cb.body.ops:
            if op.opcode == "slc.yield":
                continue
            if op.opcode == "slc.from_stream" and op.operands[0] is loop.mask:
                vmap[op.result] = mask.result
            elif op.opcode == "slc.from_stream" and op.operands[0] is loop.iv:
                continue  # only read by first_lane (checked)
            elif op.opcode == "slcv.first_lane" and op.operands[0].owner.operands[0] is loop.iv:
                vmap[op.result] = c
            elif op.opcode == "slc.from_stream" and op.operands[0] in bufs:
                vmap[op.result] = body.append(slcv.FromBufferOp.create(
                    [mems[op.operands[0]], c], [op.result.type])).result
            else:
                body.append(op.clone(value_map=vmap))
        body.append(scf.YieldOp.create([]))
        blk.append(slc.YieldOp.create([]))
        return new_cb


@register_pass
class Bufferize(ReportingPatternPass):
    """Row buffers in the queue and one callback per row."""

    name: ClassVar[str] = "bufferize"
    pattern = BufferizeRows
