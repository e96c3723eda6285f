"""``queue-align``: values the core can count itself become core-side counters instead of
travelling through the queue (Ember's queue alignment, cf. tests/eb_slc_O3.mlir).

The output row of an embedding bag is the induction variable ``b`` of the outer loop, read in
callbacks with ``slc.from_stream %b``: after decoupling every such read is a data-queue entry
per callback. When a loop at the top of a function has core-known bounds (``lb`` and ``step``
are ``slc.to_stream`` of core values), the pass gives it a carried value ``%row`` (init
``lb``), replaces every ``slc.from_stream`` of its induction variable (or of a forwarded copy)
inside its callbacks by ``%row``, and adds an end-of-iteration callback yielding
``%row + step`` (the loop yields it). ``decouple`` turns ``%row`` into the core variable
``row``: ``dlc.get_var`` in the cases and ``dlc.increment_var`` in the end callback's case.
Loops whose ``lb`` or ``step`` the core does not know are left alone (reported). On an
already decoupled program the same happens at DLC level (``passes/queue_align_dlc.py``)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ember_xla.dae_target.dialects import arith, slc
from ember_xla.dae_target.passes.queue_align_dlc import align_dlc
from ember_xla.dae_target.passes.slcv_util import PassReport, defined_inside, op_label, top_level
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.types import INDEX
from ember_xla.ir.value import Value


def _core_value(s: Value, loop: Operation) -> Value | None:
    """The core value behind stream ``s`` (an ``slc.to_stream`` outside ``loop``)."""
    o = s.owner
    if isinstance(o, Operation) and o.opcode == "slc.to_stream" and not defined_inside(s, loop):
        return o.operands[0]
    return None


def iv_reads(loop: Operation) -> list[Operation]:
    """The ``slc.from_stream`` ops reading ``loop``'s induction variable (or a forward of it)."""
    streams, reads, todo = set(), [], [loop.body.args[0]]
    while todo:
        s = todo.pop()
        if s in streams:
            continue
        streams.add(s)
        for user, _ in s.uses:
            if user.opcode == "slc.fwd_stream":
                todo.append(user.result)
            elif user.opcode == "slc.from_stream":
                reads.append(user)
    return reads


def align(loop: Operation, rw: PatternRewriter, name: str = "row") -> int:
    """Give root loop ``loop`` a core counter for its induction variable; returns the number
    of reads replaced (0: nothing to do). Raises ``ValueError`` with the reason it cannot."""
    reads = iv_reads(loop)
    if not reads:
        return 0
    lb, step = _core_value(loop.operands[0], loop), _core_value(loop.operands[2], loop)
    if lb is None or step is None or lb.type != INDEX or step.type != INDEX:
        raise ValueError("its lower bound or step is not a core value")
    old = loop.body
    new = slc.ForOp.build(*loop.operands[:3], [*loop.operands[3:], lb],
                          iv_name=old.args[0].name_hint)
    for a, b in zip(old.args[1:], new.body.args[1:], strict=False):
        b.name_hint = a.name_hint
    row = new.body.args[-1]
    row.name_hint = name
    rw.insert_before(loop, new)
    anchor = new.body.append(slc.YieldOp.create())
    rw.inline_block_before(old, anchor, new.body.args[:-1])
    rw.erase(anchor)
    old_yield = new.body.ops[-1]
    bump = slc.CallbackOp.build([INDEX])
    nxt = bump.body.append(arith.AddIOp.create([row, step], [INDEX])).result
    bump.body.append(slc.YieldOp.create([nxt]))
    rw.insert_before(old_yield, bump)
    rw.insert_before(old_yield, slc.YieldOp.create([*old_yield.operands, bump.result]))
    rw.erase(old_yield)
    for fs in reads:
        rw.replace_op(fs, row)
    for a, b in zip(loop.results, new.results, strict=False):
        b.name_hint = a.name_hint
    rw.replace_op(loop, list(new.results[:-1]))
    return len(reads)


@register_pass
@dataclasses.dataclass(frozen=True)
class QueueAlign(ModulePass):
    """Induction-variable reads of top-level loops -> core-side counters."""

    name: ClassVar[str] = "queue-align"

    def apply(self, module: Module) -> PassReport:
        report = PassReport("queue-align")
        rw = PatternRewriter()
        for g in module.graphs:
            for op in top_level(g, ("slc.for",)):
                label = op_label(op)
                try:
                    n = align(op, rw)
                except ValueError as e:
                    report.refuse(f"{label}: {e}")
                    continue
                if n:
                    report.change(f"{label}: {n} read(s) of the induction variable -> core "
                                  "counter %row (+step in an end-of-iteration callback)")
            for op in top_level(g, ("dlc.configure_access_engine",)):
                loop = op.parent.ops[op.parent.index_of(op) + 1]
                try:
                    n = align_dlc(op, loop, rw)
                except ValueError as e:
                    report.refuse(f"dlc access engine in @{g.name}: {e}")
                    continue
                if n:
                    report.change(f"dlc access engine in @{g.name}: {n} queue entr(ies) of a "
                                  "root TU's induction variable -> core variable (get_var, "
                                  "bumped by a case at the TU's iter)")
        return report
