"""Reference interpreter of the execute-side dialects (func, arith, scf, memref, vector).

Semantics: numpy in the op's own type, one rounding per op (``arith.addf`` on bf16 is the
exact sum rounded to bf16); integers wrap (two's complement); ``arith.maxf``/``minf``
propagate NaN like XLA's max/min; no flush of denormals. Memory accesses are bounds-checked
(an out-of-bounds access is an ``InterpretError``, never numpy's wrap-around). Counters:
``core.loads``/``core.stores`` (elements) and ``core.load_bytes``/``core.store_bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, InterpretError, impl
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import IntegerType, MemRefType, VectorType, element_type, numpy_dtype


def _float_op(fn: Any, op: Operation, args: tuple[Any, ...]) -> Any:
    t = op.results[0].type
    with np.errstate(all="ignore"):
        out = fn(*args)
    return of_type(out, t)


def _int_op(fn: Any, op: Operation, args: tuple[Any, ...]) -> Any:
    t = op.results[0].type
    if isinstance(t, VectorType):
        vals = [np.asarray(a).astype(object) for a in args]
        out = np.array([fn(*(int(v[i]) for v in vals)) for i in range(t.length)], dtype=object)
        return of_type(np.array([scalar(x, t.elem) for x in out]), t)
    return scalar(fn(*(int(a) for a in args)), t)


class ExecuteFunctions(InterpreterFunctions):
    """func/arith/scf/memref/vector implementations."""

    # -- func ---------------------------------------------------------------------------
    @impl("func.return")
    def return_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    # -- arith --------------------------------------------------------------------------
    @impl("arith.constant")
    def constant(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (of_type(op.attributes["value"], op.results[0].type),)

    @impl("arith.fma")
    def fma(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        t = op.results[0].type
        return (of_type(fma(*args, numpy_dtype(element_type(t))), t),)

    @impl("arith.sqrt")
    def sqrt(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (_float_op(np.sqrt, op, args),)

    @impl("arith.rsqrte")
    def rsqrte(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        import ember_xla.native  # noqa: F401  (provides the library of the host's estimate)

        return (of_type(rsqrt_estimate(args[0]), op.results[0].type),)

    @impl("arith.negf")
    def negf(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (_float_op(np.negative, op, args),)

    @impl("arith.cmpi")
    def cmpi(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        a, b = (np.asarray(x).astype(np.int64) for x in args)
        return (of_type(CMP[op.attributes["pred"]](a, b), op.results[0].type),)

    @impl("arith.cmpf")
    def cmpf(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        pred = op.attributes["pred"]
        a, b = (np.asarray(x).astype(np.float64) for x in args)
        unordered = np.isnan(a) | np.isnan(b)
        if pred == "uno":
            out = unordered
        elif pred == "ord":
            out = ~unordered
        elif pred == "one":
            out = (a != b) & ~unordered
        elif pred == "une":
            out = a != b
        else:
            with np.errstate(invalid="ignore"):
                out = CMP[pred](a, b)
        return (of_type(out, op.results[0].type),)

    @impl("arith.select")
    def select(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        c, a, b = args
        if isinstance(op.results[0].type, VectorType):
            return (of_type(np.where(c, a, b), op.results[0].type),)
        return (a if bool(c) else b,)

    def _convert(self, op: Operation, x: Any) -> Any:
        return convert(x, op.results[0].type)

    @impl("arith.extf")
    def extf(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self._convert(op, args[0]),)

    @impl("arith.truncf")
    def truncf(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self._convert(op, args[0]),)

    @impl("arith.sitofp")
    def sitofp(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self._convert(op, args[0]),)

    @impl("arith.fptosi")
    def fptosi(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self._convert(op, args[0]),)

    @impl("arith.index_cast")
    def index_cast(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self._convert(op, args[0]),)

    # -- scf ----------------------------------------------------------------------------
    @impl("scf.for")
    def for_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        lb, ub, step, *carried = args
        if int(step) <= 0:
            raise InterpretError(f"scf.for: step must be positive, got {step}")
        for i in range(int(lb), int(ub), int(step)):
            carried = list(interp.run_region(op.regions[0], [np.int64(i), *carried]))
        return tuple(carried)

    @impl("scf.if")
    def if_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        if bool(args[0]):
            return interp.run_region(op.regions[0])
        if len(op.regions) > 1:
            return interp.run_region(op.regions[1])
        return ()

    @impl("scf.yield")
    def yield_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    # -- memref -------------------------------------------------------------------------
    @impl("memref.load")
    def load(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        m, *idx = args
        v = m[element_index(m, tuple(idx), "memref.load")]
        interp.count("core.loads")
        interp.count("core.load_bytes", m.itemsize)
        return (v,)

    @impl("memref.store")
    def store(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        v, m, *idx = args
        if np.asarray(v).dtype != m.dtype:
            raise InterpretError(f"memref.store: {np.asarray(v).dtype} into {m.dtype} array")
        m[element_index(m, tuple(idx), "memref.store")] = v
        interp.count("core.stores")
        interp.count("core.store_bytes", m.itemsize)
        return ()

    @impl("memref.dim")
    def dim(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (np.int64(args[0].shape[op.attributes["dim"]]),)

    @impl("memref.alloc")
    def alloc(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        t: MemRefType = op.results[0].type
        sizes = iter(int(a) for a in args)
        shape = tuple(next(sizes) if d is None else d for d in t.shape)
        dt = numpy_dtype(t.elem)
        poison: Any = np.nan if dt.kind == "f" else (
            False if isinstance(t.elem, IntegerType) and t.elem.width == 1 else -0x5EED)
        return (np.full(shape, poison, dtype=dt),)

    # -- vector -------------------------------------------------------------------------
    def _lanes(self, m: np.ndarray, idx: tuple, mask: np.ndarray, what: str) -> list:
        base = tuple(int(i) for i in idx)
        out = []
        for lane in range(len(mask)):
            if mask[lane]:
                at = base[:-1] + (base[-1] + lane,)
                out.append((lane, element_index(m, at, what)))
        return out

    @impl("vector.maskedload")
    def maskedload(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        m, *idx, mask, passthru = args
        out = np.array(passthru, copy=True)
        lanes = self._lanes(m, tuple(idx), mask, "vector.maskedload")
        for lane, at in lanes:
            out[lane] = m[at]
        interp.count("core.loads", len(lanes))
        interp.count("core.load_bytes", len(lanes) * m.itemsize)
        return (out,)

    @impl("vector.maskedstore")
    def maskedstore(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        m, *idx, mask, v = args
        lanes = self._lanes(m, tuple(idx), mask, "vector.maskedstore")
        for lane, at in lanes:
            m[at] = v[lane]
        interp.count("core.stores", len(lanes))
        interp.count("core.store_bytes", len(lanes) * m.itemsize)
        return ()

    @impl("vector.broadcast")
    def broadcast(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (of_type(args[0], op.results[0].type),)

    @impl("vector.reduce")
    def reduce(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        v = args[0]
        fn = {"add": np.add, "max": xla_max, "min": xla_min}[op.attributes["kind"]]
        acc = v[0]
        with np.errstate(all="ignore"):
            for x in v[1:]:
                acc = np.asarray(fn(acc, x)).astype(v.dtype)[()]
        return (acc,)


def _attach(table: dict[str, Any], run: Any) -> None:
    """Add one ``@impl`` method per opcode of ``table`` to ``ExecuteFunctions``."""
    for opcode, fn in table.items():
        def method(self: Any, interp: Interpreter, op: Operation, args: tuple,
                   _fn: Any = fn) -> tuple:
            return (run(_fn, op, args),)
        method.__name__ = opcode.replace(".", "_")
        setattr(ExecuteFunctions, method.__name__, impl(opcode)(method))


_attach(FLOAT_BINARY, _float_op)
_attach(INT_BINARY, _int_op)


def functions() -> list[InterpreterFunctions]:
    """The function sets this module provides (see ``interp/run.py``)."""
    return [ExecuteFunctions()]
