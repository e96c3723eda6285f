"""The ``vector`` dialect of the Ember levels (execute-side SIMD on 1-D vectors):

- ``"vector.maskedload"(%m, %i..., %mask, %passthru)`` -> ``vector<VLxT>``: lane l reads
  ``m[i..., last + l]`` where ``mask[l]``, else takes ``passthru[l]`` (masked lanes are not
  accessed, so a tail may run past the end of the row).
- ``"vector.maskedstore"(%m, %i..., %mask, %v)``: writes the unmasked lanes likewise.
- ``"vector.broadcast"(%s)`` -> ``vector<VLxT>`` (splat of a scalar).
- ``"vector.reduce"(%v) {kind = "add"|"max"|"min"}`` -> T (sequential, lane order).
Elementwise arithmetic on vectors uses ``arith`` ops.
"""

from __future__ import annotations

from ember_xla.dae_target.dialects.memref import check_indices
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef, operand, operands
from ember_xla.ir.traits import Pure
from ember_xla.ir.types import I1, VectorType
from ember_xla.ir.value import Value

vector = register_dialect(Dialect("vector"))


def _check_mask(op: OpDef, mask: Value, vt: VectorType) -> None:
    if mask.type != VectorType(vt.shape, I1):
        raise op.fail(f"mask must be {VectorType(vt.shape, I1)}, not {mask.type}")


class _MaskedAccess(OpDef):
    """Operands of a masked load/store: memref, indices (one per dim), mask, then the passthru
    (load) or the value (store) vector."""

    memref = operand(0)
    indices = operands(1, -2)
    mask = operand(-2)

    def _verify_access(self, results: int, last: str, vt: object) -> VectorType:
        """Counts, indices, and the vector type ``vt`` (a 1-D vector of the memref's element
        type, masked by ``mask``); returns it."""
        self.expect_counts(results=results, regions=0)
        if len(self.operands) < 4:
            raise self.fail(f"expects memref, indices, mask, {last}")
        mt = check_indices(self, self.memref, self.indices)
        what = "result" if results else "value"
        if not isinstance(vt, VectorType) or len(vt.shape) != 1 or vt.elem != mt.elem:
            raise self.fail(f"{what} must be a 1-D vector of {mt.elem}")
        _check_mask(self, self.mask, vt)
        return vt


@vector.add_op
class MaskedLoadOp(_MaskedAccess):
    """Operands: memref, indices (one per dim), mask, passthru."""

    opcode = "vector.maskedload"

    passthru = operand(-1)

    def verify_(self) -> None:
        vt = self._verify_access(1, "passthru", self.result.type if self.results else None)
        if self.passthru.type != vt:
            raise self.fail(f"passthru must be {vt}")


@vector.add_op
class MaskedStoreOp(_MaskedAccess):
    """Operands: memref, indices (one per dim), mask, value vector."""

    opcode = "vector.maskedstore"

    value = operand(-1)

    def verify_(self) -> None:
        self._verify_access(0, "value", self.value.type if self.operands else None)


@vector.add_op
class BroadcastOp(OpDef):
    """``"vector.broadcast"(%s) : (f32) -> vector<8xf32>``."""

    opcode = "vector.broadcast"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        vt = self.result.type
        if not isinstance(vt, VectorType) or vt.elem != self.operands[0].type:
            raise self.fail(f"result must be a vector of {self.operands[0].type}")


@vector.add_op
class ReduceOp(OpDef):
    """``"vector.reduce"(%v) {kind = "add"}`` -> scalar; lanes combined in order."""

    opcode = "vector.reduce"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        if self.attr("kind", str) not in ("add", "max", "min"):
            raise self.fail("kind must be add, max or min")
        vt = self.operands[0].type
        if not isinstance(vt, VectorType) or self.result.type != vt.elem:
            raise self.fail(f"reduces a vector to its element type, not {vt}")
