"""The ``scf`` dialect of the Ember levels (execute-side structured control flow):

- ``"scf.for"(%lb, %ub, %step, %init...) ({^bb0(%i: index, %carried...): ...
  "scf.yield"(%next...)})`` -> the final carried values. Runs ``i = lb, lb+step, ... < ub``
  (``step > 0``); zero iterations return ``init``.
- ``"scf.if"(%cond) ({then}, {else})`` -> results; each region ends in ``scf.yield`` of the
  result values; the else region may be omitted when there are no results.
- ``"scf.yield"(%vals...)`` terminator of both.
"""

from __future__ import annotations

from ember_xla.dae_target.dialects.common import LoopOpDef
from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.traits import IsTerminator, SingleBlock, has_parent
from ember_xla.ir.types import I1, INDEX, IndexType
from ember_xla.ir.value import Value

scf = register_dialect(Dialect("scf"))


def _yield_types(op: OpDef, region_index: int) -> list:
    term = op.regions[region_index].block.terminator
    if term is None or term.opcode != "scf.yield":
        raise op.fail(f"region {region_index} must end in scf.yield")
    return [v.type for v in term.operands]


@scf.add_op
class ForOp(LoopOpDef):
    """Counted loop; operands ``lb, ub, step`` (index) then the initial carried values."""

    opcode = "scf.for"
    traits = frozenset({SingleBlock})

    @classmethod
    def build(cls, lb: Value, ub: Value, step: Value, init: list[Value] = ()) -> ForOp:
        """An empty loop (body block with ``i`` and the carried args, no ops yet)."""
        body = Block([INDEX] + [v.type for v in init])
        body.args[0].name_hint = "i"
        return cls.create([lb, ub, step, *init], [v.type for v in init],
                          regions=[Region([body])])

    def verify_(self) -> None:
        self.expect_counts(regions=1)
        if len(self.operands) < 3:
            raise self.fail("expects lb, ub, step")
        for v in self.operands[:3]:
            if not isinstance(v.type, IndexType):
                raise self.fail(f"bounds and step must be index, not {v.type}")
        carried = [v.type for v in self.init]
        if [r.type for r in self.results] != carried:
            raise self.fail("result types must match the initial carried values")
        if [a.type for a in self.body.args] != [INDEX, *carried]:
            raise self.fail("body takes (index, carried values...)")
        if _yield_types(self, 0) != carried:
            raise self.fail("scf.yield must yield the carried values' types")


@scf.add_op
class IfOp(OpDef):
    """``scf.if``: then region, optional else region (required when there are results)."""

    opcode = "scf.if"
    traits = frozenset({SingleBlock})

    @classmethod
    def build(cls, cond: Value, result_types: list = (), with_else: bool = False) -> IfOp:
        regions = [Region([Block()])] + ([Region([Block()])] if with_else or result_types
                                         else [])
        return cls.create([cond], list(result_types), regions=regions)

    @property
    def then_block(self) -> Block:
        return self.regions[0].block

    @property
    def else_block(self) -> Block | None:
        return self.regions[1].block if len(self.regions) > 1 else None

    def verify_(self) -> None:
        self.expect_counts(operands=1)
        if self.operands[0].type != I1:
            raise self.fail(f"condition must be i1, not {self.operands[0].type}")
        if len(self.regions) not in (1, 2):
            raise self.fail("expects a then region and an optional else region")
        if self.results and len(self.regions) != 2:
            raise self.fail("an scf.if with results needs an else region")
        want = [r.type for r in self.results]
        for i in range(len(self.regions)):
            if self.regions[i].block.args:
                raise self.fail("regions take no arguments")
            if _yield_types(self, i) != want:
                raise self.fail(f"region {i} must yield {', '.join(map(str, want)) or '()'}")


@scf.add_op
class YieldOp(OpDef):
    """``"scf.yield"(%vals...)``: ends an scf.for body or an scf.if branch."""

    opcode = "scf.yield"
    traits = frozenset({IsTerminator, has_parent("scf.for", "scf.if")})

    def verify_(self) -> None:
        self.expect_counts(results=0, regions=0)
