"""The numerics of the DAE program format, shared by the compiler's interpreters and the
emulators: XLA's NaN-propagating max/min, the fused multiply-add, the reciprocal square-root
estimate, the element-wise binary and compare tables of the execute side, and the access
side's integer ALU (``slc.alu_stream``)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ember_xla.ir.interpreter import InterpretError


def xla_max(a: Any, b: Any) -> Any:
    """XLA's max: NaN propagates (the first NaN operand), max(+0, -0) = +0."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(invalid="ignore"):
        out = np.where(a > b, a, b)
        out = np.where((a == b) & np.signbit(a), b, out)
        out = np.where((a == b) & ~np.signbit(a), a, out)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, out))


def xla_min(a: Any, b: Any) -> Any:
    """XLA's min: NaN propagates (the first NaN operand), min(+0, -0) = -0."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(invalid="ignore"):
        out = np.where(a < b, a, b)
        out = np.where((a == b) & np.signbit(a), a, out)
        out = np.where((a == b) & ~np.signbit(a), b, out)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, out))


def fma(a: Any, b: Any, c: Any, dtype: Any) -> Any:
    """``a * b + c`` rounded once to ``dtype`` (f32, f16, bf16 operands; C's ``fmaf``): the
    product is exact in f64, the f64 sum's rounding error comes from TwoSum, and where the f64
    sum sits exactly halfway between two ``dtype`` values the error's sign picks the side the
    exact sum rounds to (round-to-nearest-even of the f64 sum would pick the even one)."""
    with np.errstate(all="ignore"):
        a, b, c = (np.asarray(x).astype(np.float64) for x in (a, b, c))
        p = a * b
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        r = s.astype(dtype)
        back = r.astype(np.float64)
        up = np.nextafter(r, np.asarray(np.inf, dtype=r.dtype)).astype(np.float64)
        down = np.nextafter(r, np.asarray(-np.inf, dtype=r.dtype)).astype(np.float64)
        ok = np.isfinite(s) & np.isfinite(err) & (err != 0)
        tie_up = ok & (s > back) & (s - back == up - s) & (err > 0)
        tie_down = ok & (s < back) & (back - s == s - down) & (err < 0)
        out = np.where(tie_up, up, np.where(tie_down, down, back)).astype(dtype)
    return out if out.shape else out[()]


def rsqrt_estimate(x: Any) -> Any:
    """The execute unit's f32 reciprocal square-root estimate (``rsqrte``): the host CPU's
    ``rsqrtss``, the instruction XLA:CPU's rsqrt starts from before its Newton-Raphson steps
    (read through the native kernels' library, ``EmberRsqrtEstimate``; its provider
    ``ember_xla.native`` must have been imported)."""
    from ember_xla import ffi

    try:
        fn = ffi.library("kernels").EmberRsqrtEstimate
    except KeyError:
        raise InterpretError("rsqrte: the host's estimate comes from the native kernels' "
                             "library; import ember_xla.native first") from None
    if fn.restype is not None:  # ctypes' default (int): the signature is set once
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn.restype = None
    shape = np.shape(x)
    a = np.ascontiguousarray(np.asarray(x, np.float32).reshape(-1))
    y = np.empty_like(a)
    fn(a.ctypes.data, y.ctypes.data, a.size)
    return y.reshape(shape) if shape else y[0]


FLOAT_BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maxf": xla_max, "arith.minf": xla_min,
}
INT_BINARY = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b, "arith.maxsi": max, "arith.minsi": min,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
}
CMP = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal,
    "oeq": np.equal, "olt": np.less, "ole": np.less_equal, "ogt": np.greater,
    "oge": np.greater_equal,
}


def alu(op_name: str, a: int, b: int | None) -> int:
    """One ``slc.alu_stream`` step on Python ints (before wrapping to the result type)."""
    if op_name == "trunc32":
        return ((a + (1 << 31)) % (1 << 32)) - (1 << 31)
    if op_name == "cast":
        return a
    assert b is not None
    if op_name == "add":
        return a + b
    if op_name == "sub":
        return a - b
    if op_name == "mul":
        return a * b
    if op_name == "min":
        return min(a, b)
    if op_name == "max":
        return max(a, b)
    if op_name == "wrapneg":
        return a + b if a < 0 else a
    if op_name == "inrange":
        return int(0 <= a < b)
    if op_name == "clamp":
        return min(max(a, 0), b - 1)
    raise InterpretError(f"slc.alu_stream: unknown op {op_name!r}")
