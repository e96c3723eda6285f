"""The core-side half of ``vectorize{vl}``: element loops inside callbacks become loops over
masked vector chunks (what Ember's CallbackVectorizer does for the callbacks' own loops).

A candidate is an ``scf.for`` inside an ``slc.callback`` with step 1, no carried values and no
nested regions, whose induction variable ``i`` is used only as the last index of
``memref.load`` / ``memref.store`` ops whose other indices are loop-invariant; the rest of the
body is pure ``arith`` ops, ``memref.dim`` and loads at loop-invariant positions. The lowering
emits two such loops (``lower/emit.py``): the start-value fill of an output row
(``out[r, i] = init``: 0, or -inf for max, ...) and the mean/sqrt_n finish of a row. It becomes

    %vl = arith.constant VL : index                # splats of invariant operands here too
    scf.for %c = %lb to %ub step %vl {
      %m = slcv.mask(%c, %lb, %ub, %step)          # the tail mask
      ... vector.maskedload / arith on vectors / vector.maskedstore at (..., %c) under %m
    }

Values that depend on ``i`` become ``vector<VLxT>``; an invariant operand of a vector op is
splat once before the loop (a constant as a vector ``arith.constant``, which costs nothing,
anything else by ``vector.broadcast``), an ``arith.select`` keeps an invariant condition
scalar. Lane ``l`` of chunk ``c`` is element ``c + l`` and lanes touch distinct elements, so
every element sees the same operations in the same order as before (bit-identical results).
A loop reading a fixed element of a row it writes lane-wise is left alone, as is every loop
that does not fit; the report says why."""

from __future__ import annotations

from typing import Any

from ember_xla.dae_target.dialects import arith, scf, slcv, vector
from ember_xla.dae_target.passes.slcv_util import PassReport, constant_of, defined_inside
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern, count_edits
from ember_xla.ir.traits import Pure
from ember_xla.ir.types import I1, INDEX, FloatType, VectorType
from ember_xla.ir.value import Value

_ACCESS = ("memref.load", "memref.store")


class Refuse(Exception):
    """This loop is not vectorized (the message says why)."""


def _in_callback(op: Operation) -> bool:
    p = op.parent_op
    while p is not None:
        if p.opcode == "slc.callback":
            return True
        p = p.parent_op
    return False


def _already_vector(loop: Operation) -> bool:
    """A chunk loop (made by this pass or by bufferize): nothing to do, nothing to report."""
    return any(isinstance(v.type, VectorType) for op in loop.body.ops for v in op.results) \
        or any(op.opcode.startswith(("slcv.", "vector.")) for op in loop.body.ops)


class _CoreLoop:
    """Vectorizing one loop: the prelude (ops before the new loop) and the new body."""

    def __init__(self, old: Operation, vl: int) -> None:
        self.old, self.vl = old, vl
        self.prelude: list[Operation] = []
        self.step = self._pre(arith.ConstantOp.create([], [INDEX], {"value": vl})).result
        self.new = scf.ForOp.build(old.operands[0], old.operands[1], self.step)
        self.body = self.new.body
        self.c = self.body.args[0]  # the chunk's first element
        self.c.name_hint = old.body.args[0].name_hint
        self.mask = self.body.append(slcv.MaskOp.create(
            [self.c, old.operands[0], old.operands[1], old.operands[2]],
            [slcv.vec(vl, I1)])).result
        self.vmap: dict[Value, Value] = {}
        self.varying: set[Value] = set()
        self.splats: dict[Value, Value] = {}
        self.consts: dict[tuple[VectorType, str], Value] = {}
        self.loaded: set[Value] = set()  # memrefs read at loop-invariant positions
        self.stored: set[Value] = set()  # memrefs written lane-wise

    def _pre(self, op: Operation) -> Operation:
        self.prelude.append(op)
        return op

    def drop(self) -> None:
        for op in [*self.prelude, self.new]:
            op.drop_all_references()

    def splat(self, old: Value) -> Value:
        """The vector of an invariant value: before the loop when it is defined outside it
        (or is a constant)."""
        if old not in self.splats:
            t = slcv.vec(self.vl, old.type)
            src = old.owner if isinstance(old.owner, Operation) else None
            if src is not None and src.opcode == "arith.constant":
                self.splats[old] = self.const(t, src.attributes["value"])
            else:
                new = vector.BroadcastOp.create([self.vmap.get(old, old)], [t])
                if defined_inside(old, self.old):
                    self.body.append(new)
                else:
                    self._pre(new)
                self.splats[old] = new.result
        return self.splats[old]

    def const(self, t: VectorType, value: Any) -> Value:
        """A vector constant, made once, before the loop (constants cost nothing)."""
        key = (t, repr(value))
        if key not in self.consts:
            op = arith.ConstantOp.create([], [t], {"value": value})
            self.consts[key] = self._pre(op).result
        return self.consts[key]

    def vec(self, old: Value) -> Value:
        return self.vmap[old] if old in self.varying else self.splat(old)

    def zero(self, t: VectorType) -> Value:
        """The pass-through of masked loads."""
        return self.const(t, 0.0 if isinstance(t.elem, FloatType) else 0)

    def access(self, op: Operation) -> None:
        store = op.opcode == "memref.store"
        m, idx = (op.operands[1], op.operands[2:]) if store else (op.operands[0],
                                                                   op.operands[1:])
        iv = self.old.body.args[0]
        if any(v is iv or v in self.varying for v in idx[:-1]) or (
                idx[-1] in self.varying):
            raise Refuse(f"{op.opcode} at a position that is not the loop index")
        if idx[-1] is not iv:
            if store:
                raise Refuse("a store inside the loop does not depend on the loop index")
            self.loaded.add(m)
            self.body.append(op.clone(value_map=self.vmap))
            return
        ops = [m, *(self.vmap.get(v, v) for v in idx[:-1]), self.c, self.mask]
        if store:
            self.stored.add(m)
            self.body.append(vector.MaskedStoreOp.create([*ops, self.vec(op.operands[0])]))
        else:
            t = slcv.vec(self.vl, op.result.type)
            new = self.body.append(vector.MaskedLoadOp.create([*ops, self.zero(t)], [t]))
            self.vmap[op.result] = new.result
            self.varying.add(op.result)

    def lane_wise(self, op: Operation) -> None:
        vs = list(op.operands)
        keep_cond = op.opcode == "arith.select" and vs[0] not in self.varying
        ops = [self.vmap.get(vs[0], vs[0]) if keep_cond else self.vec(vs[0]),
               *(self.vec(v) for v in vs[1:])]
        types = [slcv.vec(self.vl, r.type) for r in op.results]
        new = self.body.append(type(op).create(ops, types, dict(op.attributes)))
        for r, n in zip(op.results, new.results, strict=True):
            self.vmap[r] = n
            self.varying.add(r)

    def run(self) -> Operation:
        iv = self.old.body.args[0]
        for op in self.old.body.ops:
            if op.opcode == "scf.yield":
                if op.operands:
                    raise Refuse("it yields values")
                self.body.append(scf.YieldOp.create([]))
            elif op.regions:
                raise Refuse(f"{op.opcode} in the loop body")
            elif op.opcode in _ACCESS:
                self.access(op)
            elif any(v is iv for v in op.operands):
                raise Refuse(f"{op.opcode} uses the loop index as a value")
            elif not (op.opcode == "memref.dim" or (
                    op.opcode.startswith("arith.") and op.has_trait(Pure))):
                raise Refuse(f"{op.opcode} in the loop body")
            elif any(v in self.varying for v in op.operands):
                self.lane_wise(op)
            else:
                self.body.append(op.clone(value_map=self.vmap))
        if self.loaded & self.stored:
            raise Refuse("it reads a fixed element of a row it writes lane-wise")
        for op in reversed(list(self.body.ops)):  # scalars only read through their splats
            if not op.users and op.opcode.startswith("arith.") and op.has_trait(Pure):
                self.body.erase(op)
        return self.new


class VectorizeCoreLoops(RewritePattern):
    def __init__(self, vl: int, report: PassReport) -> None:
        self.vl, self.report = vl, report

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "scf.for" or not op.body.args[0].uses or not _in_callback(op) \
                or _already_vector(op):
            return
        label = "scf.for in a callback"
        try:
            if op.results:
                raise Refuse("it carries values")
            if constant_of(op.operands[2]) != 1:
                raise Refuse("its step is not the constant 1")
            loop = _CoreLoop(op, self.vl)
            try:
                new = loop.run()
            except Refuse:
                loop.drop()
                raise
        except Refuse as e:
            self.report.refuse(f"{label}: {e}")
            return
        for p in loop.prelude:
            rw.insert_before(op, p)
        rw.insert_before(op, new)
        rw.erase(op)
        for v in loop.splats:  # a scalar now only read through its splat (the fill value)
            src = v.owner
            if isinstance(src, Operation) and src.parent is not None and not src.users \
                    and src.opcode.startswith("arith.") and src.has_trait(Pure):
                rw.erase(src)
        self.report.change(f"{label} -> chunks of {self.vl} (masked vector stores)")


def vectorize_core_loops(module: Module, vl: int, report: PassReport) -> None:
    """Vectorize every candidate loop of ``module`` (changes and refusals go to ``report``)."""
    count_edits(module, [VectorizeCoreLoops(vl, report)])
