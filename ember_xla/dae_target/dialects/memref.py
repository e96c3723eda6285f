"""The ``memref`` dialect of the Ember levels (execute-side memory):

- ``"memref.load"(%m, %i...)`` -> element (one index per dimension, index or iN).
- ``"memref.store"(%v, %m, %i...)`` (no result).
- ``"memref.dim"(%m) {dim = 0}`` -> index (the size of dimension ``dim``).
- ``"memref.alloc"(%sizes...)`` -> memref (one index operand per dynamic ``?`` dimension,
  in order); a core-side scratch buffer (e.g. the counts of a mean). Its contents are
  undefined until written: the interpreter fills floats with NaN and integers with a poison
  value so that a program that reads before writing is caught by the checks.
"""

from __future__ import annotations

from ember_xla.dae_target.dialects.common import is_index_like
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef, attribute, operand, operands
from ember_xla.ir.types import INDEX, IndexType, MemRefType
from ember_xla.ir.value import Value

memref = register_dialect(Dialect("memref"))


def check_indices(op: OpDef, m: Value, idx: list[Value]) -> MemRefType:
    """Common check: ``m`` is a memref indexed by ``len(idx)`` index-like scalars."""
    t = m.type
    if not isinstance(t, MemRefType):
        raise op.fail(f"expects a memref, not {t}")
    if len(idx) != t.rank:
        raise op.fail(f"{t} takes {t.rank} indices, got {len(idx)}")
    for v in idx:
        if not is_index_like(v.type):
            raise op.fail(f"index operands must be index or iN, not {v.type}")
    return t


@memref.add_op
class LoadOp(OpDef):
    """``%v = "memref.load"(%m, %i, %j)``: one element."""

    opcode = "memref.load"

    memref = operand(0)
    indices = operands(1)

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        if not self.operands:
            raise self.fail("expects a memref")
        t = check_indices(self, self.memref, self.indices)
        if self.result.type != t.elem:
            raise self.fail(f"result must be {t.elem}")


@memref.add_op
class StoreOp(OpDef):
    """``"memref.store"(%v, %m, %i, %j)``: write one element."""

    opcode = "memref.store"

    value = operand(0)
    memref = operand(1)
    indices = operands(2)

    def verify_(self) -> None:
        self.expect_counts(results=0, regions=0)
        if len(self.operands) < 2:
            raise self.fail("expects a value and a memref")
        t = check_indices(self, self.memref, self.indices)
        if self.value.type != t.elem:
            raise self.fail(f"stored value {self.value.type} is not {t.elem}")


@memref.add_op
class DimOp(OpDef):
    """``%n = "memref.dim"(%m) {dim = 1}`` -> index."""

    opcode = "memref.dim"

    dim = attribute("dim")

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        t = self.operands[0].type
        d = self.attr("dim", int)
        if not isinstance(t, MemRefType) or not 0 <= d < t.rank:
            raise self.fail(f"dim {d} of {t}")
        if not isinstance(self.result.type, IndexType):
            raise self.fail("result must be index")


@memref.add_op
class AllocOp(OpDef):
    """``%buf = "memref.alloc"(%n) : (index) -> memref<?xi64>``."""

    opcode = "memref.alloc"

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        t = self.result.type
        if not isinstance(t, MemRefType):
            raise self.fail(f"result must be a memref, not {t}")
        dyn = sum(d is None for d in t.shape)
        if len(self.operands) != dyn or any(v.type != INDEX for v in self.operands):
            raise self.fail(f"{t} needs {dyn} index size operands")
