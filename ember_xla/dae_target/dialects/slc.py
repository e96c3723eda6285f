"""The SLC dialect (Structured Lookup-Compute, after Ember): access-unit streams and the
core-side callbacks they fire. Sequential reference semantics in ``interp/slc.py``.

Type: ``!slc.stream<T>`` (``StreamType``; ``StreamType.of(T)``, ``.elem``): a stream of T on the
access unit; T is a scalar, a vector or a memref (a row buffer, SLCV).

Ops (operands -> results):
- ``slc.to_stream(v)`` -> ``!slc.stream<T>``: a core value (loop bound, size) as a stream.
- ``slc.from_stream(s)`` -> T: the stream's current element; only inside a callback.
- ``slc.for(lb, ub, step, init...)`` -> carried values. lb/ub/step are index streams; the
  single-block region is ``^bb0(%iv: !slc.stream<index>, %carried: T...)`` and ends in
  ``slc.yield(carried...)``. One traversal unit: ``for iv in range(lb, ub, step)``.
- ``slc.mem_stream(m, idx...)`` -> ``!slc.stream<elem(m)>``: one load of ``m[idx...]`` per
  iteration of the enclosing loop; one index stream (index or iN) per memref dimension.
  A mem_stream whose index is another mem_stream is an indirect (chained) lookup.
- ``slc.alu_stream(a[, b]) {op}`` -> integer stream, computed in int64 then wrapped to the
  result's element type. Binary: ``add sub mul min max``, ``wrapneg`` (a < 0 ? a + b : a),
  ``inrange`` (0 <= a < b -> 1 else 0; result elem i1), ``clamp`` (min(max(a, 0), b - 1)).
  Unary: ``trunc32`` (low 32 bits, two's complement, sign-extended), ``cast`` (the value
  in the result's element type, e.g. an i32 offset stream as an index stream).
- ``slc.fwd_stream(s)`` -> same type: a parent loop's stream forwarded into a nested loop.
- ``slc.callback()`` ``({ ... slc.yield(vals...) })`` -> yielded values: execute-unit code
  fired at its place in the loop body (before a nested slc.for = begin of that loop, after it
  = end, alone in the innermost body = once per iteration). Inside: execute-side dialects
  (arith, scf, memref, vector) and ``slc.from_stream``. No operands, no block arguments.
- ``slc.yield(vals...)``: terminator of slc.for and slc.callback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.dae_target.dialects.common import LoopOpDef, has_ancestor, is_index_like
from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef, attribute, operand, operands
from ember_xla.ir.traits import IsTerminator, SingleBlock, has_parent
from ember_xla.ir.types import I1, INDEX, DialectType, IndexType, IntegerType, MemRefType, Type
from ember_xla.ir.value import Value

slc = register_dialect(Dialect("slc"))

ALU_BINARY = ("add", "sub", "mul", "min", "max", "wrapneg", "inrange", "clamp")
ALU_UNARY = ("trunc32", "cast")
ALU_OPS = ALU_BINARY + ALU_UNARY


@slc.add_type
@dataclasses.dataclass(frozen=True)
class StreamType(DialectType):
    """``!slc.stream<T>``."""

    type_name = "slc.stream"

    def __post_init__(self) -> None:
        if self.name != self.type_name or len(self.params) != 1 or not isinstance(
                self.params[0], Type):
            raise ValueError("!slc.stream takes exactly one type parameter")

    @classmethod
    def of(cls, elem: Type) -> StreamType:
        return cls(cls.type_name, (elem,))

    @property
    def elem(self) -> Type:
        return self.params[0]


INDEX_STREAM = StreamType.of(INDEX)


def is_stream(t: Any, elem: Any = None) -> bool:
    return isinstance(t, StreamType) and (elem is None or t.elem == elem)


def _int_stream(t: Any) -> bool:
    return isinstance(t, StreamType) and isinstance(t.elem, IntegerType | IndexType)


def in_callback(op: OpDef) -> bool:
    """Inside a callback of any level (``*.callback``) or a DLC compute case."""
    return has_ancestor(op, lambda p: p.opcode.endswith(".callback")
                        or p.opcode == "dlc.compute_loop")


@slc.add_op
class ToStreamOp(OpDef):
    """``"slc.to_stream"(%v) : (index) -> !slc.stream<index>``."""

    opcode = "slc.to_stream"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        if self.result.type != StreamType.of(self.operands[0].type):
            raise self.fail(f"result must be !slc.stream<{self.operands[0].type}>")


@slc.add_op
class FromStreamOp(OpDef):
    """``"slc.from_stream"(%s) : (!slc.stream<f32>) -> f32`` (inside a callback)."""

    opcode = "slc.from_stream"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        t = self.operands[0].type
        if not is_stream(t) or self.result.type != t.elem:
            raise self.fail(f"reads a stream's element type, not {t} -> {self.result.type}")
        if not in_callback(self):
            raise self.fail("may only be used inside a callback")


@slc.add_op
class ForOp(LoopOpDef):
    """A traversal unit: ``lb, ub, step`` (index streams), then initial carried values."""

    opcode = "slc.for"
    traits = frozenset({SingleBlock})

    @classmethod
    def build(cls, lb: Value, ub: Value, step: Value, init: list[Value] = (),
              iv_name: str | None = None) -> ForOp:
        """An empty loop: body block ``(iv, carried...)`` without ops (append a yield)."""
        body = Block([INDEX_STREAM] + [v.type for v in init])
        body.args[0].name_hint = iv_name
        return cls.create([lb, ub, step, *init], [v.type for v in init],
                          regions=[Region([body])])

    @property
    def carried(self) -> list[Value]:
        return self.body.args[1:]

    def verify_(self) -> None:
        self.expect_counts(regions=1)
        if len(self.operands) < 3:
            raise self.fail("expects lb, ub, step streams")
        for v in self.operands[:3]:
            if v.type != INDEX_STREAM:
                raise self.fail(f"bounds and step must be !slc.stream<index>, not {v.type}")
        carried = [v.type for v in self.init]
        if [r.type for r in self.results] != carried:
            raise self.fail("result types must match the initial carried values")
        if [a.type for a in self.body.args] != [INDEX_STREAM, *carried]:
            raise self.fail("body takes (!slc.stream<index>, carried values...)")
        term = self.body.terminator
        if term is None or term.opcode != "slc.yield":
            raise self.fail("body must end in slc.yield")
        if [v.type for v in term.operands] != carried:
            raise self.fail("slc.yield must yield the carried values' types")


@slc.add_op
class MemStreamOp(OpDef):
    """``"slc.mem_stream"(%m, %i, %k) : (memref<?x?xf32>, !slc.stream<i32>,
    !slc.stream<index>) -> !slc.stream<f32>``."""

    opcode = "slc.mem_stream"

    memref = operand(0)
    indices = operands(1)

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        if not self.operands or not isinstance(self.memref.type, MemRefType):
            raise self.fail("expects a memref first")
        mt = self.memref.type
        if len(self.indices) != mt.rank:
            raise self.fail(f"{mt} takes {mt.rank} index streams, got {len(self.indices)}")
        for v in self.indices:
            if not (isinstance(v.type, StreamType) and is_index_like(v.type.elem)):
                raise self.fail(f"indices must be integer streams, not {v.type}")
        if self.result.type != StreamType.of(mt.elem):
            raise self.fail(f"result must be !slc.stream<{mt.elem}>")


@slc.add_op
class AluStreamOp(OpDef):
    """``"slc.alu_stream"(%a, %b) {op = "add"} : (...) -> !slc.stream<index>``."""

    opcode = "slc.alu_stream"

    op = attribute("op")

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        op = self.attr("op", str)
        if op not in ALU_OPS:
            raise self.fail(f"unknown alu op {op!r} (have: {', '.join(ALU_OPS)})")
        want = 1 if op in ALU_UNARY else 2
        if len(self.operands) != want:
            raise self.fail(f"{op} takes {want} operands")
        for v in self.operands:
            if not _int_stream(v.type):
                raise self.fail(f"operands must be integer streams, not {v.type}")
        rt = self.result.type
        if not _int_stream(rt):
            raise self.fail(f"result must be an integer stream, not {rt}")
        if op == "inrange" and rt.elem != I1:
            raise self.fail("inrange yields !slc.stream<i1>")


@slc.add_op
class FwdStreamOp(OpDef):
    """``"slc.fwd_stream"(%s)``: the same stream, forwarded into a nested loop."""

    opcode = "slc.fwd_stream"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        if not is_stream(self.operands[0].type) or self.result.type != self.operands[0].type:
            raise self.fail("forwards a stream unchanged")


@slc.add_op
class CallbackOp(OpDef):
    """Core code fired at its position in a loop body; results = what it yields."""

    opcode = "slc.callback"
    traits = frozenset({SingleBlock})

    @classmethod
    def build(cls, result_types: list = ()) -> CallbackOp:
        """An empty callback (append its ops and a ``slc.yield``)."""
        return cls.create([], list(result_types), regions=[Region([Block()])])

    def verify_(self) -> None:
        self.expect_counts(operands=0, regions=1)
        if self.body.args:
            raise self.fail("a callback takes no block arguments")
        term = self.body.terminator
        if term is None or term.opcode != "slc.yield":
            raise self.fail("body must end in slc.yield")
        if [v.type for v in term.operands] != [r.type for r in self.results]:
            raise self.fail("slc.yield must yield the callback's result types")
        for r in self.results:
            if isinstance(r.type, StreamType):
                raise self.fail("a callback returns core values, not streams")


@slc.add_op
class YieldOp(OpDef):
    """``"slc.yield"(%vals...)``: ends an slc.for body or a callback."""

    opcode = "slc.yield"
    traits = frozenset({IsTerminator, has_parent("slc.for", "slc.callback")})

    def verify_(self) -> None:
        self.expect_counts(results=0, regions=0)
