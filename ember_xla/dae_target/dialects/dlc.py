"""The DLC dialect (Decoupled Lookup-Compute, after Ember): one program for the access engine
(traversal units, streams, and what they push into the queues at which event) and one for the
core (a loop that pops control tokens and runs the matching case). Semantics and counters:
``interp/dlc.py``.

Type: ``!dlc.tu`` (``TU``), a traversal-unit handle.

Access side, inside ``dlc.configure_access_engine`` (one block, no terminator, no results):
- ``dlc.new_tu([parent,] lb, ub, step) {vl?}`` -> ``!dlc.tu``. A traversal unit iterating
  ``range(lb, ub, step)`` (index streams). With a ``parent`` TU it is nested: it starts once per
  iteration of the parent (siblings in program order); its bounds must be streams of the parent
  or of the parent's ancestors. Without a parent it is a root TU (roots run in program order).
  ``vl = N`` makes it a vector TU: an iteration covers ``N`` lanes, the tail lanes are masked.
- ``dlc.get_ind_var(tu)`` -> ``!slc.stream<index>`` (``vector<VLxindex>`` for a vector TU);
  ``dlc.get_mask(tu)`` -> ``!slc.stream<vector<VLxi1>>`` (vector TU only; false past ``ub``).
- Stream ops of slc/slcv (``mem_stream``, ``alu_stream``, ``to_stream``). A stream belongs to
  the deepest TU its operands come from and is evaluated once per iteration of that TU, before
  the TU's nested TUs run.
- ``dlc.register_operand(tu, stream) {event}``: push the stream's current value onto the data
  queue when ``event`` of ``tu`` fires. A vector stream of a vector TU registered at that TU's
  ``end`` pushes a whole row buffer (``memref<?xT>`` of length ``ub``, lane values stored at
  their induction-variable positions): bufferization.
- ``dlc.register_callback(tu) {event, id}``: push control token ``id`` at that event.
- Events: ``begin`` (each time the TU starts, before its first iteration), ``iter`` (after
  each iteration, nested TUs done), ``end`` (after the last iteration). ``begin`` and ``end``
  fire even when the TU has no iteration. At one event registrations fire in program order.

Core side:
- ``dlc.compute_loop(init...) {cases = [ids], vars = [names]}`` -> final values of the core
  variables ``vars`` (initialised from ``init``); one single-block region per case id. It pops
  control tokens until the access engine is done and runs the matching case. It must follow a
  ``dlc.configure_access_engine`` directly.
- In cases: ``dlc.pop_operand`` -> T (the next data-queue entry), ``dlc.get_var {name}`` -> T,
  ``dlc.set_var(v) {name}``, ``dlc.increment_var {name}`` (adds 1 to an integer variable),
  ``slc.from_stream`` is not used (values arrive by ``pop_operand``); terminator ``dlc.yield``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.operation import Operation
from ember_xla.ir.traits import IsTerminator, NoTerminator, SingleBlock, has_parent
from ember_xla.ir.types import I1, INDEX, DialectType, IndexType, IntegerType, VectorType
from ember_xla.ir.value import Value

dlc = register_dialect(Dialect("dlc"))

EVENTS = ("begin", "iter", "end")


@dlc.add_type
@dataclasses.dataclass(frozen=True)
class TUType(DialectType):
    """``!dlc.tu``."""

    type_name = "dlc.tu"

    def __post_init__(self) -> None:
        if self.name != self.type_name or self.params:
            raise ValueError("!dlc.tu takes no parameters")


TU = TUType("dlc.tu")


def in_configure(op: Operation) -> bool:
    return op.parent_op is not None and op.parent_op.opcode == "dlc.configure_access_engine"


def in_case(op: Operation) -> bool:
    """Inside a case of a ``dlc.compute_loop`` (at any depth)."""
    p = op.parent_op
    while p is not None:
        if p.opcode == "dlc.compute_loop":
            return True
        p = p.parent_op
    return False


@dlc.add_op
class ConfigureOp(OpDef):
    """The access-engine program: one block of TU, stream and registration ops."""

    opcode = "dlc.configure_access_engine"
    traits = frozenset({SingleBlock, NoTerminator})

    @classmethod
    def build(cls) -> ConfigureOp:
        return cls.create([], [], regions=[Region([Block()])])

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=0, regions=1)
        if self.body.args:
            raise self.fail("takes no block arguments")
        blk = self.parent
        nxt = blk.ops[blk.index_of(self) + 1] if blk is not None and blk.index_of(
            self) + 1 < len(blk.ops) else None
        if nxt is None or nxt.opcode != "dlc.compute_loop":
            raise self.fail("must be followed directly by its dlc.compute_loop")
        from ember_xla.dae_target.dialects.dlc_engine import EngineError, plan

        try:
            plan(self)
        except EngineError as e:
            raise self.fail(str(e)) from None


@dlc.add_op
class NewTUOp(OpDef):
    """``"dlc.new_tu"([%parent,] %lb, %ub, %step) {vl?} : (...) -> !dlc.tu``."""

    opcode = "dlc.new_tu"
    traits = frozenset({has_parent("dlc.configure_access_engine")})

    @classmethod
    def build(cls, lb: Value, ub: Value, step: Value, parent: Value | None = None,
              vl: int | None = None) -> NewTUOp:
        ops = [lb, ub, step] if parent is None else [parent, lb, ub, step]
        return cls.create(ops, [TU], {} if vl is None else {"vl": vl})

    @property
    def parent_tu(self) -> Value | None:
        return self.operands[0] if len(self.operands) == 4 else None

    @property
    def bounds(self) -> list[Value]:
        return self.operands[-3:]

    @property
    def vl(self) -> int | None:
        return self.attributes.get("vl")

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        if len(self.operands) not in (3, 4):
            raise self.fail("expects [parent,] lb, ub, step")
        if self.parent_tu is not None and self.parent_tu.type != TU:
            raise self.fail("the parent must be a !dlc.tu")
        for v in self.bounds:
            if v.type != StreamType.of(INDEX):
                raise self.fail(f"bounds and step must be !slc.stream<index>, not {v.type}")
        if self.result.type != TU:
            raise self.fail("result must be !dlc.tu")
        vl = self.attributes.get("vl")
        if vl is not None and (not isinstance(vl, int) or isinstance(vl, bool) or vl < 1):
            raise self.fail(f"vl must be a positive integer, not {vl!r}")


def _tu_op(v: Value) -> NewTUOp | None:
    return v.owner if isinstance(v.owner, NewTUOp) else None


class _TUQuery(OpDef):
    traits = frozenset({has_parent("dlc.configure_access_engine")})

    def check_tu(self) -> NewTUOp:
        self.expect_counts(operands=1, results=1, regions=0)
        tu = _tu_op(self.operands[0])
        if tu is None:
            raise self.fail("expects the result of a dlc.new_tu")
        return tu


@dlc.add_op
class GetIndVarOp(_TUQuery):
    """``"dlc.get_ind_var"(%tu) : (!dlc.tu) -> !slc.stream<index>``."""

    opcode = "dlc.get_ind_var"

    def verify_(self) -> None:
        tu = self.check_tu()
        want = INDEX if tu.vl is None else VectorType((tu.vl,), INDEX)
        if self.result.type != StreamType.of(want):
            raise self.fail(f"result must be !slc.stream<{want}>")


@dlc.add_op
class GetMaskOp(_TUQuery):
    """``"dlc.get_mask"(%tu) : (!dlc.tu) -> !slc.stream<vector<8xi1>>`` (vector TUs)."""

    opcode = "dlc.get_mask"

    def verify_(self) -> None:
        tu = self.check_tu()
        if tu.vl is None:
            raise self.fail("only a vector TU (vl) has a mask")
        if self.result.type != StreamType.of(VectorType((tu.vl,), I1)):
            raise self.fail(f"result must be !slc.stream<vector<{tu.vl}xi1>>")


class _Register(OpDef):
    traits = frozenset({has_parent("dlc.configure_access_engine")})

    @property
    def tu(self) -> Value:
        return self.operands[0]

    @property
    def event(self) -> str:
        return self.attributes["event"]

    def check(self, n_operands: int) -> None:
        self.expect_counts(operands=n_operands, results=0, regions=0)
        if _tu_op(self.tu) is None:
            raise self.fail("the first operand must be the result of a dlc.new_tu")
        if self.attr("event", str) not in EVENTS:
            raise self.fail(f"event must be one of {', '.join(EVENTS)}, not {self.event!r}")


@dlc.add_op
class RegisterOperandOp(_Register):
    """``"dlc.register_operand"(%tu, %s) {event = "iter"} : (!dlc.tu, !slc.stream<T>) -> ()``."""

    opcode = "dlc.register_operand"

    @property
    def stream(self) -> Value:
        return self.operands[1]

    def verify_(self) -> None:
        self.check(2)
        if not isinstance(self.stream.type, StreamType):
            raise self.fail(f"registers a stream, not {self.stream.type}")


@dlc.add_op
class RegisterCallbackOp(_Register):
    """``"dlc.register_callback"(%tu) {event = "end", id = 1} : (!dlc.tu) -> ()``."""

    opcode = "dlc.register_callback"

    @property
    def case_id(self) -> int:
        return self.attributes["id"]

    def verify_(self) -> None:
        self.check(1)
        if not isinstance(self.attr("id", int), int) or isinstance(self.case_id, bool):
            raise self.fail("id must be an integer")


@dlc.add_op
class ComputeLoopOp(OpDef):
    """The core loop: one region per case id; results = final values of ``vars``."""

    opcode = "dlc.compute_loop"
    traits = frozenset({SingleBlock})

    @classmethod
    def build(cls, cases: list[int], vars_: list[str] = (), init: list[Value] = ()
              ) -> ComputeLoopOp:
        """Empty cases (append ops and a ``dlc.yield`` to each)."""
        return cls.create(list(init), [v.type for v in init],
                          {"cases": list(cases), "vars": list(vars_)},
                          regions=[Region([Block()]) for _ in cases])

    @property
    def cases(self) -> list[int]:
        return list(self.attributes["cases"])

    @property
    def vars(self) -> list[str]:
        return list(self.attributes.get("vars", []))

    def case(self, id_: int) -> Block:
        return self.regions[self.cases.index(id_)].block

    def var_type(self, name: str) -> Any:
        return self.operands[self.vars.index(name)].type

    def verify_(self) -> None:
        cases = self.attr("cases", list)
        if len(set(cases)) != len(cases) or not all(
                isinstance(c, int) and not isinstance(c, bool) for c in cases):
            raise self.fail("cases must be distinct integers")
        self.expect_counts(regions=len(cases))
        names = self.attributes.get("vars", [])
        if len(names) != len(self.operands) or len(set(names)) != len(names):
            raise self.fail("needs one distinct var name per initial value")
        if [r.type for r in self.results] != [v.type for v in self.operands]:
            raise self.fail("result types must match the initial values")
        prev = self.parent.ops[self.parent.index_of(self) - 1] if self.parent is not None \
            and self.parent.index_of(self) > 0 else None
        if prev is None or prev.opcode != "dlc.configure_access_engine":
            raise self.fail("must directly follow a dlc.configure_access_engine")
        for r in self.regions:
            if r.block.args:
                raise self.fail("a case takes no block arguments")
            term = r.block.terminator
            if term is None or term.opcode != "dlc.yield":
                raise self.fail("each case must end in dlc.yield")


def enclosing_loop(op: Operation) -> ComputeLoopOp | None:
    p = op.parent_op
    while p is not None and p.opcode != "dlc.compute_loop":
        p = p.parent_op
    return p  # type: ignore[return-value]


class _CoreOp(OpDef):
    def check_in_case(self) -> ComputeLoopOp:
        loop = enclosing_loop(self)
        if loop is None:
            raise self.fail("may only be used inside a dlc.compute_loop case")
        return loop

    def check_var(self) -> Any:
        loop = self.check_in_case()
        name = self.attr("name", str)
        if name not in loop.vars:
            raise self.fail(f"unknown core variable {name!r} (have: {', '.join(loop.vars)})")
        return loop.var_type(name)


@dlc.add_op
class PopOperandOp(_CoreOp):
    """``"dlc.pop_operand"() : () -> T``: the next data-queue entry."""

    opcode = "dlc.pop_operand"

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=1, regions=0)
        self.check_in_case()
        if isinstance(self.result.type, StreamType | TUType):
            raise self.fail("pops a core value, not a stream")


@dlc.add_op
class GetVarOp(_CoreOp):
    """``"dlc.get_var"() {name = "row"} : () -> index``."""

    opcode = "dlc.get_var"

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=1, regions=0)
        if self.result.type != self.check_var():
            raise self.fail("result type must be the variable's type")


@dlc.add_op
class SetVarOp(_CoreOp):
    """``"dlc.set_var"(%v) {name = "row"} : (index) -> ()``."""

    opcode = "dlc.set_var"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=0, regions=0)
        if self.operands[0].type != self.check_var():
            raise self.fail("the value's type must be the variable's type")


@dlc.add_op
class IncrementVarOp(_CoreOp):
    """``"dlc.increment_var"() {name = "row"} : () -> ()``: adds 1."""

    opcode = "dlc.increment_var"

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=0, regions=0)
        if not isinstance(self.check_var(), IndexType | IntegerType):
            raise self.fail("only integer variables can be incremented")


@dlc.add_op
class YieldOp(OpDef):
    """``"dlc.yield"() : () -> ()``: ends a case."""

    opcode = "dlc.yield"
    traits = frozenset({IsTerminator, has_parent("dlc.compute_loop")})

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=0, regions=0)
