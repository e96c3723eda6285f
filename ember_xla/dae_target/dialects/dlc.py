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

from ember_xla.dae_target.dialects.dlc_compute import (  # noqa: F401  (the core-side ops join)
    ComputeLoopOp,
    GetVarOp,
    IncrementVarOp,
    PopOperandOp,
    SetVarOp,
    YieldOp,
)
from ember_xla.dae_target.dialects.dlc_engine import EngineError, plan
from ember_xla.dae_target.dialects.dlc_types import EVENTS, TU, TUType, dlc  # noqa: F401
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.ir.block import Block, Region
from ember_xla.ir.opdef import OpDef, attribute, operand, operands
from ember_xla.ir.operation import Operation
from ember_xla.ir.traits import NoTerminator, SingleBlock, has_parent
from ember_xla.ir.types import I1, INDEX, VectorType
from ember_xla.ir.value import Value


def in_configure(op: Operation) -> bool:
    return op.parent_op is not None and op.parent_op.opcode == "dlc.configure_access_engine"


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

    bounds = operands(-3)

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

    tu = operand(0)
    event = attribute("event")

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

    stream = operand(1)

    def verify_(self) -> None:
        self.check(2)
        if not isinstance(self.stream.type, StreamType):
            raise self.fail(f"registers a stream, not {self.stream.type}")


@dlc.add_op
class RegisterCallbackOp(_Register):
    """``"dlc.register_callback"(%tu) {event = "end", id = 1} : (!dlc.tu) -> ()``."""

    opcode = "dlc.register_callback"

    case_id = attribute("id")

    def verify_(self) -> None:
        self.check(1)
        if not isinstance(self.attr("id", int), int) or isinstance(self.case_id, bool):
            raise self.fail("id must be an integer")
