"""Reference interpreter of the ``slcv`` dialect (vectorized SLC), on top of the SLC and
execute-side interpreters: streams hold their current element, a vector stream a numpy array of
``VL`` lanes (masked-off lanes hold 0), a row buffer a numpy array.

Counters (``Interpreter.counters``), next to SLC's ``slc.*``:
- ``slcv.iterations`` vector-loop iterations, ``slcv.lanes`` active lanes iterated;
- ``slcv.vectors`` vector mem_stream accesses (with at least one active lane), split into
  ``slcv.contiguous`` (one contiguous vector load) and ``slcv.gathers`` (lane-wise gathers);
  ``slcv.elements`` lanes loaded, ``slcv.bytes`` bytes loaded;
- ``slcv.buffer_writes`` / ``slcv.buffer_elements`` / ``slcv.buffer_bytes`` what to_buffer
  writes into queue row buffers; ``slcv.buffers`` row buffers made;
- ``slcv.alu`` vector alu evaluations, ``slcv.alu_lanes`` their lanes;
- ``slcv.unique_ids`` ids sorted by slcv.unique, ``slcv.unique_rows`` distinct ids found.
Loads are always checked to be in bounds (an out-of-range active lane is an error, never a
silent wrap)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.dae.numerics import alu
from ember_xla.dae.values import check_memref, element_index, of_type
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, InterpretError, impl
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import numpy_dtype


def _lanes(x: Any, vl: int) -> np.ndarray:
    """A scalar index broadcast to ``vl`` lanes, or the index vector itself (as int64)."""
    a = np.asarray(x, dtype=np.int64)
    return np.broadcast_to(a, (vl,)) if a.ndim == 0 else a


class SlcvFunctions(InterpreterFunctions):
    @impl("slcv.for")
    def for_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        lb, ub, step = (int(a) for a in args[:3])
        carried = tuple(args[3:])
        vl = op.attributes["vl"]
        if step <= 0:
            raise InterpretError(f"slcv.for: step must be positive, got {step}")
        lanes = np.arange(vl, dtype=np.int64) * step
        for base in range(lb, ub, step * vl):
            iv = base + lanes
            mask = iv < ub
            interp.count("slcv.iterations")
            interp.count("slcv.lanes", int(mask.sum()))
            carried = interp.run_region(op.regions[0], (iv, mask, *carried))
        return carried

    @impl("slcv.yield")
    def yield_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    @impl("slcv.mem_stream")
    def mem_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        m = check_memref(args[0], op.operands[0].type, "slcv.mem_stream")
        mask = np.asarray(args[-1], dtype=bool)
        vl = mask.shape[0]
        idx = [_lanes(a, vl) for a in args[1:-1]]
        out = np.zeros(vl, dtype=m.dtype)
        active = np.flatnonzero(mask)
        if op.attributes.get("contiguous", False) and len(active):
            # lanes a0..a_last read consecutive elements from lane a0's position on
            a0, count = active[0], active[-1] - active[0] + 1
            start = element_index(m, tuple(i[a0] for i in idx), "slcv.mem_stream")
            element_index(m, start[:-1] + (start[-1] + count - 1,), "slcv.mem_stream")
            out[a0:a0 + count] = m[start[:-1]][start[-1]:start[-1] + count]
            out[~mask] = 0
            interp.count("slcv.contiguous")
        else:
            for lane in active:
                out[lane] = m[element_index(m, tuple(i[lane] for i in idx), "slcv.mem_stream")]
            if len(active):
                interp.count("slcv.gathers")
        if len(active):
            interp.count("slcv.vectors")
        interp.count("slcv.elements", len(active))
        interp.count("slcv.bytes", len(active) * m.dtype.itemsize)
        return (out,)

    @impl("slcv.alu_stream")
    def alu_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        vt = op.result.type.elem
        vl = vt.shape[0]
        a = _lanes(args[0], vl)
        b = _lanes(args[1], vl) if len(args) > 1 else [None] * vl
        name = op.attributes["op"]
        vals = [alu(name, int(x), None if y is None else int(y))
                for x, y in zip(a, b, strict=True)]
        interp.count("slcv.alu")
        interp.count("slcv.alu_lanes", vl)
        return (of_type(np.array(vals, dtype=object).astype(np.int64), vt),)

    @impl("slcv.buf_stream")
    def buf_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        n = int(args[0])
        if n < 0:
            raise InterpretError(f"slcv.buf_stream: negative size {n}")
        interp.count("slcv.buffers")
        return (np.zeros(n, dtype=numpy_dtype(op.result.type.elem.elem)),)

    @impl("slcv.to_buffer")
    def to_buffer(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        vals, buf, iv, mask = args
        active = np.flatnonzero(np.asarray(mask, dtype=bool))
        for lane in active:
            (pos,) = element_index(buf, (iv[lane],), "slcv.to_buffer")
            buf[pos] = vals[lane]
        if len(active):
            interp.count("slcv.buffer_writes")
        interp.count("slcv.buffer_elements", len(active))
        interp.count("slcv.buffer_bytes", len(active) * buf.dtype.itemsize)
        return ()

    @impl("slcv.from_buffer")
    def from_buffer(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        buf, i = args[0], int(args[1])
        vl = op.result.type.shape[0]
        out = np.zeros(vl, dtype=buf.dtype)
        if i < 0:
            raise InterpretError(f"slcv.from_buffer: negative position {i}")
        chunk = buf[i:i + vl]
        out[:len(chunk)] = chunk
        return (out,)

    @impl("slcv.mask")
    def mask(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        i, lb, ub, step = (int(a) for a in args)
        lanes = i + np.arange(op.result.type.shape[0], dtype=np.int64) * step
        return ((lanes >= lb) & (lanes < ub),)

    @impl("slcv.first_lane")
    def first_lane(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (of_type(np.asarray(args[0])[0], op.result.type),)

    @impl("slcv.unique")
    def unique(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        ids = args[0]
        uniq, inv = np.unique(ids.reshape(-1), return_inverse=True)
        interp.count("slcv.unique_ids", ids.size)
        interp.count("slcv.unique_rows", len(uniq))
        return (uniq.astype(ids.dtype), inv.astype(np.int64).reshape(ids.shape),
                np.int64(len(uniq)))


def functions() -> list[InterpreterFunctions]:
    """The function sets this module provides (``interp/run.py`` adds slc's and execute's)."""
    return [SlcvFunctions()]
