"""Small type predicates shared by the verifiers of the Ember-level dialects (func, arith, scf,
memref, vector, slc and the later levels)."""

from __future__ import annotations

from typing import Any

from ember_xla.ir.opdef import OpDef, operand, operands
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import (
    I1,
    FloatType,
    IndexType,
    IntegerType,
    MemRefType,
    Type,
    VectorType,
    element_type,
)
from ember_xla.ir.value import Value


def is_float(t: Any) -> bool:
    """A float scalar or a vector of floats."""
    return isinstance(element_type(t), FloatType) and not isinstance(t, MemRefType)


def is_int(t: Any) -> bool:
    """An integer/index scalar or a vector of them (``i1`` included)."""
    return (isinstance(element_type(t), IntegerType | IndexType)
            and not isinstance(t, MemRefType))


def is_scalar(t: Any) -> bool:
    return isinstance(t, IntegerType | IndexType | FloatType)


def is_index_like(t: Any) -> bool:
    """A scalar usable as a memory index (``index`` or a signed integer, not ``i1``)."""
    return isinstance(t, IndexType) or (isinstance(t, IntegerType) and t.width > 1)


def same_shape_bool(t: Type) -> Type:
    """``i1`` for a scalar, ``vector<..xi1>`` for a vector of the same shape."""
    return VectorType(t.shape, I1) if isinstance(t, VectorType) else I1


def has_ancestor(op: Operation, pred: Any) -> bool:
    """True when an enclosing op (at any depth) satisfies ``pred(op)``."""
    p = op.parent_op
    while p is not None:
        if pred(p):
            return True
        p = p.parent_op
    return False


class LoopOpDef(OpDef):
    """Accessors shared by the counted loops (``scf.for``, ``slc.for``, ``slcv.for``): operands
    ``(lb, ub, step, init...)``, one body block whose first argument is the induction variable
    and whose further arguments are the carried values."""

    lb = operand(0)
    ub = operand(1)
    step = operand(2)
    init = operands(3)

    @property
    def iv(self) -> Value:
        return self.body.args[0]
