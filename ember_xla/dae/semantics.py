"""What each straight-line DAE instruction computes, on numpy values (docs/DAE_PROGRAM.md):
the DLC interpreter's semantics (``interp/execute.py``, ``interp/slcv.py``), reused helper by
helper so the reference emulator is bit-exact with it. ``step(ins, vals, types)`` returns the
destination values; structured instructions (``for``, ``if``, ``run``) and the queue (``pop``)
are the emulator's business."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember_xla.dae.errors import ProgramError
from ember_xla.dae.model import Instr
from ember_xla.dae.numerics import (
    CMP,
    FLOAT_BINARY,
    INT_BINARY,
    fma,
    rsqrt_estimate,
    xla_max,
    xla_min,
)
from ember_xla.dae.values import convert, element_index, of_type, scalar
from ember_xla.ir.types import (
    IntegerType,
    MemRefType,
    Type,
    VectorType,
    element_type,
    numpy_dtype,
)

_FLOAT = {k.removeprefix("arith."): v for k, v in FLOAT_BINARY.items()}
_INT = {k.removeprefix("arith."): v for k, v in INT_BINARY.items()}


def _int_op(fn: Callable[..., int], t: Type, args: list[Any]) -> Any:
    if isinstance(t, VectorType):
        vals = [np.asarray(a).astype(object) for a in args]
        out = [scalar(fn(*(int(v[i]) for v in vals)), t.elem) for i in range(t.length)]
        return of_type(np.array(out), t)
    return scalar(fn(*(int(a) for a in args)), t)


def cmpf(pred: str, a: Any, b: Any) -> Any:
    a, b = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    unordered = np.isnan(a) | np.isnan(b)
    if pred == "uno":
        return unordered
    if pred == "ord":
        return ~unordered
    if pred == "one":
        return (a != b) & ~unordered
    if pred == "une":
        return a != b
    with np.errstate(invalid="ignore"):
        return CMP[pred](a, b)


def _lanes(m: np.ndarray, idx: list[Any], mask: np.ndarray, what: str
           ) -> tuple[np.ndarray, tuple[Any, ...]]:
    """(active lanes, numpy index of their elements): lane ``l`` reads
    ``m[idx[:-1], idx[-1] + l]``; every active lane is bounds-checked."""
    base = tuple(int(i) for i in idx)
    active = np.flatnonzero(mask)
    if not len(active):
        return active, ()
    element_index(m, base[:-1] + (base[-1] + int(active[0]),), what)
    element_index(m, base[:-1] + (base[-1] + int(active[-1]),), what)
    return active, base[:-1] + (base[-1] + active,)


def alloc(t: MemRefType, shape: tuple[int, ...], sizes: list[Any]) -> np.ndarray:
    it = iter(int(s) for s in sizes)
    dims = tuple(next(it) if d < 0 else d for d in shape)
    dt = numpy_dtype(t.elem)
    poison: Any = np.nan if dt.kind == "f" else (
        False if isinstance(t.elem, IntegerType) and t.elem.width == 1 else -0x5EED)
    return np.full(dims, poison, dtype=dt)


def step(ins: Instr, v: list[Any], dst_types: list[Type]) -> tuple[Any, ...]:
    """The destination values of ``ins`` given its source values ``v`` (stores write into
    the memref values and return nothing)."""
    op, t = ins.op, (dst_types[0] if dst_types else None)
    if op == "const":
        return (of_type(ins.imm[0], t),)
    if op in _FLOAT:
        with np.errstate(all="ignore"):
            return (of_type(_FLOAT[op](*v), t),)
    if op in _INT:
        return (_int_op(_INT[op], t, v),)
    if op == "fma":
        return (of_type(fma(*v, numpy_dtype(element_type(t))), t),)
    if op == "rsqrte":
        return (of_type(rsqrt_estimate(v[0]), t),)
    if op in ("sqrt", "negf"):
        with np.errstate(all="ignore"):
            return (of_type((np.sqrt if op == "sqrt" else np.negative)(v[0]), t),)
    if op in ("extf", "truncf", "sitofp", "fptosi", "index_cast"):
        return (convert(v[0], t),)
    if op == "cmpi":
        a, b = (np.asarray(x).astype(np.int64) for x in v)
        return (of_type(CMP[ins.imm[0]](a, b), t),)
    if op == "cmpf":
        return (of_type(cmpf(str(ins.imm[0]), *v), t),)
    if op == "select":
        c, a, b = v
        return (of_type(np.where(c, a, b), t),) if isinstance(t, VectorType) else \
            (a if bool(c) else b,)
    if op == "dim":
        return (np.int64(v[0].shape[int(ins.imm[0])]),)
    if op == "load":
        m, *idx = v
        return (m[element_index(m, tuple(idx), "load")],)
    if op == "store":
        x, m, *idx = v
        if np.asarray(x).dtype != m.dtype:
            raise ProgramError(f"store: {np.asarray(x).dtype} into {m.dtype} array")
        m[element_index(m, tuple(idx), "store")] = x
        return ()
    if op == "maskedload":
        m, *idx, mask, passthru = v
        out = np.array(passthru, copy=True)
        active, at = _lanes(m, idx, mask, "maskedload")
        if len(active):
            out[active] = m[at]
        return (out,)
    if op == "maskedstore":
        m, *idx, mask, x = v
        active, at = _lanes(m, idx, mask, "maskedstore")
        if len(active):
            m[at] = np.asarray(x)[active]
        return ()
    if op == "broadcast":
        return (of_type(v[0], t),)
    if op == "reduce":
        fn = {"add": np.add, "max": xla_max, "min": xla_min}[str(ins.imm[0])]
        acc = v[0][0]
        with np.errstate(all="ignore"):
            for x in v[0][1:]:
                acc = np.asarray(fn(acc, x)).astype(v[0].dtype)[()]
        return (acc,)
    if op == "alloc":
        return (alloc(t, tuple(int(d) for d in ins.imm), v),)
    if op == "mov":
        return (v[0],)
    if op == "from_buffer":
        buf, i = v[0], int(v[1])
        if i < 0:
            raise ProgramError(f"from_buffer: negative position {i}")
        out = np.zeros(t.shape[0], dtype=buf.dtype)
        chunk = buf[i:i + t.shape[0]]
        out[:len(chunk)] = chunk
        return (out,)
    if op == "vmask":
        i, lb, ub, st = (int(a) for a in v)
        lanes = i + np.arange(t.shape[0], dtype=np.int64) * st
        return ((lanes >= lb) & (lanes < ub),)
    if op == "first_lane":
        return (of_type(np.asarray(v[0])[0], t),)
    if op == "unique":
        ids = v[0]
        uniq, inv = np.unique(ids.reshape(-1), return_inverse=True)
        return (uniq.astype(ids.dtype), inv.astype(np.int64).reshape(ids.shape),
                np.int64(len(uniq)))
    raise ProgramError(f"{op}: not a straight-line instruction")
