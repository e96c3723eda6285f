"""The ``arith`` dialect of the Ember levels: constants, elementwise float/integer arithmetic,
comparisons, select and casts, on scalars and vectors alike (elementwise). Semantics (see
``interp/execute.py``): numpy in the op's own type, one rounding per op; ``maxf``/``minf``
propagate NaN like XLA's max/min.

Ops (operands -> result):
- ``arith.constant() {value}`` -> scalar, or vector splat of ``value`` (float, int or bool).
- ``arith.addf|subf|mulf|divf|maxf|minf(a, b)`` -> a's type (floats).
- ``arith.addi|subi|muli|maxsi|minsi|andi|ori|xori(a, b)`` -> a's type (integers/index/i1).
- ``arith.fma(a, b, c)`` -> a's type: ``a * b + c`` rounded once (f32 scalars/vectors).
- ``arith.sqrt(a)``, ``arith.negf(a)`` -> a's type (floats).
- ``arith.rsqrte(a)`` -> a's type (f32): the reciprocal square-root estimate instruction (the
  host CPU's ``rsqrtss``, which XLA:CPU's rsqrt refines by Newton-Raphson steps).
- ``arith.cmpi(a, b) {pred}`` (eq ne slt sle sgt sge) and ``arith.cmpf(a, b) {pred}``
  (oeq one olt ole ogt oge une uno ord) -> i1 (or vector of i1).
- ``arith.select(c, a, b)`` -> a's type (c: i1 scalar, or i1 vector of the same shape).
- ``arith.extf|truncf(a)`` float widening/narrowing (f16/bf16 <-> f32 <-> f64),
  ``arith.sitofp(a)`` int -> float, ``arith.fptosi(a)`` float -> int (truncation),
  ``arith.index_cast(a)`` index <-> iN (sign extension / two's complement truncation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_xla.dae_target.dialects.common import is_float, is_int, is_scalar, same_shape_bool
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef, attribute
from ember_xla.ir.traits import Pure
from ember_xla.ir.types import FloatType, IndexType, IntegerType, VectorType, element_type

arith = register_dialect(Dialect("arith"))

CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge")
CMPF_PREDICATES = ("oeq", "one", "olt", "ole", "ogt", "oge", "une", "uno", "ord")


def _shape(t: Any) -> tuple[int, ...] | None:
    return t.shape if isinstance(t, VectorType) else None


@arith.add_op
class ConstantOp(OpDef):
    """``%c = "arith.constant"() {value = 0.0} : () -> f32`` (a vector result is a splat)."""

    opcode = "arith.constant"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=0, results=1, regions=0)
        v = self.attr("value", (int, float, bool))
        t = self.result.type
        if not (is_scalar(t) or isinstance(t, VectorType)):
            raise self.fail(f"result must be a scalar or vector, not {t}")
        if isinstance(element_type(t), IntegerType | IndexType) and isinstance(v, float):
            raise self.fail(f"float value {v} for integer type {t}")

    value = attribute("value")


def _elementwise(opcode: str, arity: int, pred: Callable[[Any], bool], what: str,
                 doc: str) -> type[OpDef]:
    def verify_(self: OpDef) -> None:
        self.expect_counts(operands=arity, results=1, regions=0)
        t = self.result.type
        if not pred(t):
            raise self.fail(f"expects {what} operands, not {t}")
        for v in self.operands:
            if v.type != t:
                raise self.fail(f"operand type {v.type} differs from the result type {t}")

    cls = type(opcode.split(".")[1].title() + "Op", (OpDef,),
               {"opcode": opcode, "traits": frozenset({Pure}), "verify_": verify_,
                "__doc__": doc, "__module__": __name__})
    return arith.add_op(cls)


AddFOp = _elementwise("arith.addf", 2, is_float, "float", "a + b, rounded once")
SubFOp = _elementwise("arith.subf", 2, is_float, "float", "a - b, rounded once")
MulFOp = _elementwise("arith.mulf", 2, is_float, "float", "a * b, rounded once")
DivFOp = _elementwise("arith.divf", 2, is_float, "float", "a / b, rounded once")
MaxFOp = _elementwise("arith.maxf", 2, is_float, "float", "max(a, b), NaN-propagating")
MinFOp = _elementwise("arith.minf", 2, is_float, "float", "min(a, b), NaN-propagating")
FmaOp = _elementwise("arith.fma", 3, lambda t: is_float(t) and str(element_type(t)) == "f32",
                     "f32", "fused multiply-add a * b + c, rounded once (C's fmaf; XLA:CPU's "
                     "contracted form)")
SqrtOp = _elementwise("arith.sqrt", 1, is_float, "float", "sqrt(a), rounded once")
RsqrtEOp = _elementwise("arith.rsqrte", 1, lambda t: is_float(t) and str(element_type(t)) == "f32",
                        "f32", "the CPU's reciprocal square-root estimate of a (rsqrtss)")
NegFOp = _elementwise("arith.negf", 1, is_float, "float", "-a")
AddIOp = _elementwise("arith.addi", 2, is_int, "integer", "a + b (wrapping)")
SubIOp = _elementwise("arith.subi", 2, is_int, "integer", "a - b (wrapping)")
MulIOp = _elementwise("arith.muli", 2, is_int, "integer", "a * b (wrapping)")
MaxSIOp = _elementwise("arith.maxsi", 2, is_int, "integer", "signed max(a, b)")
MinSIOp = _elementwise("arith.minsi", 2, is_int, "integer", "signed min(a, b)")
AndIOp = _elementwise("arith.andi", 2, is_int, "integer", "a & b")
OrIOp = _elementwise("arith.ori", 2, is_int, "integer", "a | b")
XOrIOp = _elementwise("arith.xori", 2, is_int, "integer", "a ^ b")


class _CmpOp(OpDef):
    traits = frozenset({Pure})
    predicates: tuple[str, ...] = ()
    operand_pred: Callable[[Any], bool] = staticmethod(is_int)

    def verify_(self) -> None:
        self.expect_counts(operands=2, results=1, regions=0)
        pred = self.attr("pred", str)
        if pred not in self.predicates:
            raise self.fail(f"unknown predicate {pred!r} (have: {', '.join(self.predicates)})")
        a, b = (v.type for v in self.operands)
        if a != b or not type(self).operand_pred(a):
            raise self.fail(f"bad operand types {a}, {b}")
        if self.result.type != same_shape_bool(a):
            raise self.fail(f"result must be {same_shape_bool(a)}")

    pred = attribute("pred")


@arith.add_op
class CmpIOp(_CmpOp):
    """``"arith.cmpi"(%a, %b) {pred = "slt"}`` -> i1 (signed integer comparison)."""

    opcode = "arith.cmpi"
    predicates = CMPI_PREDICATES


@arith.add_op
class CmpFOp(_CmpOp):
    """``"arith.cmpf"(%a, %b) {pred = "olt"}`` -> i1 (ordered/unordered float comparison)."""

    opcode = "arith.cmpf"
    predicates = CMPF_PREDICATES
    operand_pred = staticmethod(is_float)


@arith.add_op
class SelectOp(OpDef):
    """``"arith.select"(%cond, %a, %b)``: a where cond, else b (elementwise for vectors)."""

    opcode = "arith.select"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=3, results=1, regions=0)
        c, a, b = (v.type for v in self.operands)
        if a != b or self.result.type != a:
            raise self.fail(f"branches {a}, {b} and result {self.result.type} must agree")
        if c != same_shape_bool(a) and str(c) != "i1":
            raise self.fail(f"condition must be i1 or {same_shape_bool(a)}, not {c}")


def _cast(opcode: str, ok: Callable[[Any, Any], bool], doc: str) -> type[OpDef]:
    def verify_(self: OpDef) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        src, dst = self.operands[0].type, self.result.type
        if _shape(src) != _shape(dst):
            raise self.fail(f"cast changes the shape: {src} -> {dst}")
        if not ok(element_type(src), element_type(dst)):
            raise self.fail(f"cannot cast {src} to {dst}")

    name = "".join(p.title() for p in opcode.split(".")[1].split("_")) + "Op"
    cls = type(name, (OpDef,), {"opcode": opcode, "traits": frozenset({Pure}),
                                "verify_": verify_, "__doc__": doc, "__module__": __name__})
    return arith.add_op(cls)


def _wider(a: Any, b: Any) -> bool:
    return (isinstance(a, FloatType) and isinstance(b, FloatType) and a.width < b.width)


def _int(t: Any) -> bool:
    return isinstance(t, IntegerType | IndexType)


ExtFOp = _cast("arith.extf", _wider, "float widening (exact)")
TruncFOp = _cast("arith.truncf", lambda a, b: _wider(b, a),
                 "float narrowing (round to nearest even)")
SIToFPOp = _cast("arith.sitofp", lambda a, b: _int(a) and isinstance(b, FloatType),
                 "signed integer -> float (round to nearest even)")
FPToSIOp = _cast("arith.fptosi", lambda a, b: isinstance(a, FloatType) and _int(b),
                 "float -> signed integer (toward zero)")
IndexCastOp = _cast("arith.index_cast",
                    lambda a, b: _int(a) and _int(b) and (isinstance(a, IndexType)
                                                          or isinstance(b, IndexType)),
                    "index <-> iN (sign-extend or two's complement truncate)")
