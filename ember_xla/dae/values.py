"""How interpreters of the Ember levels represent values: memrefs are numpy arrays (mutable,
shared), scalars numpy scalars of the exact dtype of their IR type (``index`` -> int64,
``i1`` -> bool), vectors 1-D numpy arrays. Helpers to make and check them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.ir.interpreter import InterpretError
from ember_xla.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    MemRefType,
    Type,
    VectorType,
    element_type,
    numpy_dtype,
)


def wrap_int(x: int, t: Type) -> int:
    """Two's complement wrap of Python int ``x`` to integer type ``t`` (index = 64 bits)."""
    width = 64 if isinstance(t, IndexType) else t.width
    if width == 1:
        return int(x) & 1
    half = 1 << (width - 1)
    return ((int(x) + half) % (1 << width)) - half


def scalar(x: Any, t: Type) -> Any:
    """``x`` as a numpy scalar of type ``t`` (integers wrap; floats round to nearest even)."""
    dt = numpy_dtype(t)
    if isinstance(t, IntegerType | IndexType):
        if t == IntegerType(1):
            return np.bool_(bool(x))
        return dt.type(wrap_int(int(x), t))
    return np.asarray(x).astype(dt)[()]


def of_type(x: Any, t: Type) -> Any:
    """``x`` (scalar or array) as a value of type ``t`` (scalar, or vector of t's shape)."""
    if isinstance(t, VectorType):
        arr = np.asarray(x)
        if isinstance(element_type(t), IntegerType | IndexType) and arr.dtype != bool:
            arr = _wrap_array(arr, element_type(t))
        arr = arr.astype(numpy_dtype(t.elem))
        if arr.shape != t.shape:
            arr = np.broadcast_to(arr, t.shape).copy()
        return arr
    return scalar(x, t)


def _wrap_array(arr: np.ndarray, t: Type) -> np.ndarray:
    width = 64 if isinstance(t, IndexType) else t.width
    if width == 1:
        return arr.astype(bool)
    with np.errstate(over="ignore"):
        return arr.astype(np.int64).astype(f"int{width}")


def check_memref(m: Any, t: MemRefType, what: str) -> np.ndarray:
    """``m`` is a numpy array fitting memref type ``t``; else an ``InterpretError``."""
    if not isinstance(m, np.ndarray):
        raise InterpretError(f"{what}: expected an array for {t}, got {type(m).__name__}")
    if m.dtype != numpy_dtype(t.elem) or m.ndim != t.rank or any(
            d is not None and d != s for d, s in zip(t.shape, m.shape, strict=True)):
        raise InterpretError(f"{what}: array {m.dtype}{list(m.shape)} does not fit {t}")
    return m


def element_index(m: np.ndarray, idx: tuple[Any, ...], what: str) -> tuple[int, ...]:
    """Indices as ints, checked to be inside ``m`` (no numpy negative wrap-around)."""
    out = tuple(int(i) for i in idx)
    for d, (i, n) in enumerate(zip(out, m.shape, strict=True)):
        if not 0 <= i < n:
            raise InterpretError(f"{what}: index {i} out of bounds for dimension {d} "
                                 f"(size {n})")
    return out


def is_float_type(t: Type) -> bool:
    return isinstance(element_type(t), FloatType)


def convert(x: Any, t: Type) -> Any:
    """extf / truncf / sitofp / fptosi / index_cast to ``t``."""
    elem = t.elem if isinstance(t, VectorType) else t
    src = np.asarray(x)
    if isinstance(elem, FloatType):
        with np.errstate(all="ignore"):
            out = src.astype(np.float64).astype(numpy_dtype(elem)) if src.dtype.kind in "iub" \
                else src.astype(numpy_dtype(elem))
        return of_type(out, t)
    if src.dtype.kind == "f":
        with np.errstate(all="ignore"):
            src = np.trunc(src.astype(np.float64))
    if isinstance(t, VectorType):
        return of_type(src.astype(np.int64), t)
    return scalar(int(src), t)
