"""The core side of the DLC dialect (``dialects/dlc.py`` describes it): ``dlc.compute_loop``
with one region per case, and the ops of its cases: ``dlc.pop_operand``, ``dlc.get_var``,
``dlc.set_var``, ``dlc.increment_var``, ``dlc.yield``. Registered into the ``dlc`` dialect when
``dialects/dlc.py`` (which imports this module) is imported."""

from __future__ import annotations

from typing import Any

from ember_xla.dae_target.dialects.dlc_types import TUType, dlc
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.ir.block import Block, Region
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.operation import Operation
from ember_xla.ir.traits import IsTerminator, SingleBlock, has_parent
from ember_xla.ir.types import IndexType, IntegerType
from ember_xla.ir.value import Value


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
