"""``vectorize{vl=8}``: innermost SLC row loops become ``slcv.for<VL>`` loops (Ember's
SlcVectorizer + CallbackVectorizer).

A candidate is an innermost ``slc.for`` without carried values and with step 1 whose
induction variable ``k`` feeds mem and alu streams and, inside the callbacks, is read through
``slc.from_stream``. Its streams computed from ``k`` become ``slcv.alu_stream`` s and masked
``slcv.mem_stream`` s of ``VL`` lanes (scalar indices are broadcast: ``config = "bcast"``), and
each callback is vectorized lane-wise: values that depend on ``k`` become vectors, arithmetic
becomes vector arithmetic (uniform operands broadcast), a ``memref.load``/``store`` whose last
index is ``k`` becomes ``vector.maskedload``/``maskedstore`` at the chunk's first lane under the
tail mask. Lanes touch distinct elements, so every element sees the same operations in the same
order as before (bit-identical results). Loops it cannot vectorize this way are left alone
and named in the report with the reason. First, element loops inside callbacks (the fill of
an output row with its start value, the mean/sqrt_n finish) become loops over masked vector
chunks (``vectorize_core.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ember_xla.dae_target.dialects import arith, scf, slc, slcv, vector
from ember_xla.dae_target.passes.slcv_util import (
    PassReport,
    constant_of,
    has_nested_loop,
    op_label,
    uses_inside,
)
from ember_xla.dae_target.passes.vectorize_core import vectorize_core_loops
from ember_xla.ir.block import Block, Region
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern, count_edits
from ember_xla.ir.types import I1, INDEX, FloatType, VectorType
from ember_xla.ir.value import Value

_STREAM_OPS = ("slc.mem_stream", "slc.alu_stream", "slc.to_stream", "slc.fwd_stream",
               "slc.callback", "slc.yield")


class Refuse(Exception):
    """This loop cannot be vectorized (the message says why)."""


class _Loop:
    """State of vectorizing one loop: the new body and the old -> new value map."""

    def __init__(self, old: Operation, vl: int) -> None:
        self.old, self.vl = old, vl
        body = Block([slcv.stream(slcv.vec(vl, INDEX)), slcv.stream(slcv.vec(vl, I1))])
        body.args[0].name_hint = (old.iv.name_hint or "k") + "v"
        body.args[1].name_hint = "mask"
        self.new = slcv.ForOp.create(old.operands[:3], [], {"vl": vl, "config": "vector"},
                                     regions=[Region([body])])
        self.body = body
        self.vmap: dict[Value, Value] = {old.iv: body.args[0]}
        self.varying_streams: set[Value] = {old.iv}

    def vector_stream(self, op: Operation) -> None:
        """A mem or alu stream computed from the loop index: ``VL`` lanes at once."""
        elem = op.result.type.elem
        t = slcv.stream(slcv.vec(self.vl, elem))
        ops = [self.vmap.get(v, v) for v in op.operands]
        if op.opcode == "slc.alu_stream":
            new = self.body.append(slcv.AluStreamOp.create(ops, [t], dict(op.attributes)))
        else:
            new = self.body.append(slcv.MemStreamOp.create(ops + [self.body.args[1]], [t]))
            if any(not isinstance(v.type.elem, VectorType) for v in ops[1:]):
                self.new.attributes["config"] = "bcast"
        self.vmap[op.result] = new.result
        self.varying_streams.add(op.result)

    def run(self) -> Operation:
        for op in self.old.body.ops:
            if op.opcode not in _STREAM_OPS:
                raise Refuse(f"{op.opcode} in the loop body")
            if op.opcode == "slc.yield":
                self.body.append(slcv.YieldOp.create([]))
            elif op.opcode == "slc.callback":
                _Callback(self, op).run()
            elif op.opcode in ("slc.mem_stream", "slc.alu_stream") and any(
                    v in self.varying_streams for v in op.operands):
                self.vector_stream(op)
            elif any(v in self.varying_streams for v in op.operands):
                raise Refuse(f"{op.opcode} reads the loop index")
            else:
                self.body.append(op.clone(value_map=self.vmap))
        return self.new


class _Callback:
    """Lane-wise vectorization of one callback of the loop."""

    def __init__(self, loop: _Loop, old: Operation) -> None:
        self.loop, self.old, self.vl = loop, old, loop.vl
        self.new = loop.body.append(slc.CallbackOp.build())
        self.top = self.block = self.new.body
        self.vmap = loop.vmap
        self.varying: set[Value] = set()  # old values that become vectors
        self.lane_index: set[Value] = set()  # old values equal to k
        self.prelude: dict[str, Value] = {}
        self.splats: dict[tuple[Value, int], Value] = {}
        self.loaded: set[Value] = set()  # memrefs read at loop-independent positions
        self.stored: set[Value] = set()  # memrefs written lane-wise

    def _pre(self, key: str, op: Operation) -> Value:
        if key not in self.prelude:
            self.top.insert(len(self.prelude), op)
            self.prelude[key] = op.result
        else:
            op.drop_all_references()
        return self.prelude[key]

    def mask(self) -> Value:
        m = self.loop.body.args[1]
        return self._pre("mask", slc.FromStreamOp.create([m], [m.type.elem]))

    def base(self) -> Value:
        iv = self.loop.body.args[0]
        kv = self._pre("kv", slc.FromStreamOp.create([iv], [iv.type.elem]))
        return self._pre("base", slcv.FirstLaneOp.create([kv], [INDEX]))

    def splat(self, v: Value) -> Value:
        key = (v, id(self.block))  # a splat made in an scf.if branch is not visible outside
        if key not in self.splats:
            t = slcv.vec(self.vl, v.type)
            self.splats[key] = self.add(vector.BroadcastOp.create([v], [t])).result
        return self.splats[key]

    def add(self, op: Operation) -> Operation:
        return self.block.append(op)

    def vec_operand(self, old: Value) -> Value:
        new = self.vmap.get(old, old)
        return new if old in self.varying else self.splat(new)

    def zero(self, t: VectorType) -> Value:
        value: Any = 0.0 if isinstance(t.elem, FloatType) else 0
        return self.add(arith.ConstantOp.create([], [t], {"value": value})).result

    def memory(self, op: Operation, store: bool) -> None:
        idx = op.operands[2:] if store else op.operands[1:]
        m = op.operands[1] if store else op.operands[0]
        if not idx:  # a rank-0 memref (a scalar operand such as a learning rate)
            if store:
                raise Refuse("a store of a scalar inside the row loop")
            self.loaded.add(m)
            self.vmap[op.result] = self.add(op.clone(value_map=self.vmap)).result
            return
        if any(v in self.varying for v in idx[:-1]) or (
                idx[-1] in self.varying and idx[-1] not in self.lane_index):
            raise Refuse(f"{op.opcode} at a position that is not the loop index")
        if idx[-1] not in self.lane_index:
            if store:
                raise Refuse("a store inside the row loop does not depend on the loop index")
            self.loaded.add(m)
            self.vmap[op.result] = self.add(op.clone(value_map=self.vmap)).result
            return
        ops = [self.vmap.get(m, m)] + [self.vmap.get(v, v) for v in idx[:-1]]
        ops += [self.base(), self.mask()]
        if store:
            self.stored.add(m)
            self.add(vector.MaskedStoreOp.create(ops + [self.vec_operand(op.operands[0])]))
        else:
            t = slcv.vec(self.vl, op.result.type)
            new = self.add(vector.MaskedLoadOp.create(ops + [self.zero(t)], [t]))
            self.vmap[op.result] = new.result
            self.varying.add(op.result)

    def run(self) -> None:
        if self.old.results:
            raise Refuse("a callback of the row loop returns values")
        self.run_block(self.old.body)
        if self.loaded & self.stored:
            raise Refuse("a callback reads a fixed element of a row it writes lane-wise")

    def run_block(self, block: Block) -> None:
        for op in block.ops:
            varying = any(v in self.varying for v in op.operands)
            if op.opcode == "slc.from_stream" and op.operands[0] in self.loop.varying_streams:
                s = op.operands[0]
                if s is self.loop.old.iv:
                    self.base()
                    self.vmap[op.result] = self.prelude["kv"]
                    self.lane_index.add(op.result)
                else:  # read in the prelude: the stream's element is fixed during a callback
                    new_s = self.vmap[s]
                    self.vmap[op.result] = self._pre(
                        f"s{id(s)}", slc.FromStreamOp.create([new_s], [new_s.type.elem]))
                self.varying.add(op.result)
            elif op.opcode in ("memref.load", "memref.store"):
                self.memory(op, op.opcode == "memref.store")
            elif op.opcode.startswith("arith.") and varying:
                types = [slcv.vec(self.vl, r.type) for r in op.results]
                new = self.add(type(op).create([self.vec_operand(v) for v in op.operands],
                                               types, dict(op.attributes)))
                for r, n in zip(op.results, new.results, strict=True):
                    self.vmap[r] = n
                    self.varying.add(r)
            elif op.opcode in ("slc.yield", "scf.yield") and not op.operands:
                self.add(type(op).create([]))
            elif op.opcode == "scf.if" and (
                    self._reads(op) or any(v in self.varying for v in uses_inside(op))):
                self.uniform_if(op)
            elif varying or any(v in self.varying for v in uses_inside(op)) or self._reads(op):
                raise Refuse(f"{op.opcode} uses a value of the loop index")
            else:
                self.add(op.clone(value_map=self.vmap))

    def _reads(self, op: Operation) -> bool:
        """Does a region of ``op`` read a vectorized stream?"""
        return any(o.opcode == "slc.from_stream" and o.operands[0] in self.loop.varying_streams
                   for o in op.walk() if o is not op)

    def uniform_if(self, op: Operation) -> None:
        """An ``scf.if`` on a loop-independent condition: vectorize its branches."""
        if op.results or any(v in self.varying for v in op.operands):
            raise Refuse("an scf.if depends on the loop index or yields values")
        new = self.add(scf.IfOp.build(self.vmap.get(op.operands[0], op.operands[0]),
                                      with_else=len(op.regions) > 1))
        outer = self.block
        for old_r, new_r in zip(op.regions, new.regions, strict=True):
            self.block = new_r.block
            self.run_block(old_r.block)
        self.block = outer


class VectorizeRowLoops(RewritePattern):
    def __init__(self, vl: int, report: PassReport) -> None:
        self.vl, self.report = vl, report

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.opcode != "slc.for" or has_nested_loop(op.body) or not op.iv.uses:
            return
        label = op_label(op)
        try:
            if op.init:
                raise Refuse("it carries values")
            if constant_of(op.step) != 1:
                raise Refuse("its step is not the constant 1")
            loop = _Loop(op, self.vl)
            try:
                new = loop.run()
            except Refuse:
                loop.new.drop_all_references()
                raise
        except Refuse as e:
            self.report.refuse(f"{label}: {e}")
            return
        rewriter.insert_before(op, new)
        rewriter.erase(op)
        self.report.change(f"{label} -> slcv.for<{self.vl}> ({new.attributes['config']})")


@register_pass
@dataclasses.dataclass(frozen=True)
class Vectorize(ModulePass):
    """Vectorize innermost row loops with ``vl`` lanes."""

    name: ClassVar[str] = "vectorize"
    vl: int = 8

    def apply(self, module: Module) -> PassReport:
        if self.vl < 1:
            raise ValueError(f"vectorize: vl must be positive, not {self.vl}")
        report = PassReport(f"vectorize{{vl={self.vl}}}")
        vectorize_core_loops(module, self.vl, report)
        count_edits(module, [VectorizeRowLoops(self.vl, report)])
        return report
