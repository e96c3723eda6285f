"""Reference interpreter of the SLC dialect: sequential semantics, a stream's value is its
current element (loop bodies run in order, a mem_stream loads once each time its op runs, a
callback runs at its place in the body).

Counters (``Interpreter.counters``), the numbers later levels and the emulator build on:
``slc.elements`` (elements loaded by mem_streams), ``slc.bytes`` (bytes they loaded),
``slc.callbacks`` (callbacks fired), ``slc.iterations`` (slc.for iterations, all levels of
nesting) and ``slc.alu`` (alu_stream evaluations).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.dae.numerics import alu
from ember_xla.dae.values import element_index, scalar
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, InterpretError, impl
from ember_xla.ir.operation import Operation

ELEMENTS, BYTES, CALLBACKS, ITERATIONS, ALU = (
    "slc.elements", "slc.bytes", "slc.callbacks", "slc.iterations", "slc.alu")


class SlcFunctions(InterpreterFunctions):
    """slc.* implementations (use together with ``execute.ExecuteFunctions``)."""

    @impl("slc.to_stream")
    def to_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    @impl("slc.from_stream")
    def from_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    @impl("slc.fwd_stream")
    def fwd_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args

    @impl("slc.for")
    def for_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        lb, ub, step, *carried = args
        if int(step) <= 0:
            raise InterpretError(f"slc.for: step must be positive, got {step}")
        region = op.regions[0]
        for i in range(int(lb), int(ub), int(step)):
            interp.count(ITERATIONS)
            carried = list(interp.run_region(region, [np.int64(i), *carried]))
        return tuple(carried)

    @impl("slc.mem_stream")
    def mem_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        m, *idx = args
        v = m[element_index(m, tuple(idx), "slc.mem_stream")]
        interp.count(ELEMENTS)
        interp.count(BYTES, m.itemsize)
        return (v,)

    @impl("slc.alu_stream")
    def alu_stream(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        a = int(args[0])
        b = int(args[1]) if len(args) > 1 else None
        interp.count(ALU)
        return (scalar(alu(op.attributes["op"], a, b), op.results[0].type.elem),)

    @impl("slc.callback")
    def callback(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        interp.count(CALLBACKS)
        return interp.run_region(op.regions[0])

    @impl("slc.yield")
    def yield_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return args


def functions() -> list[InterpreterFunctions]:
    """The function sets this module provides (see ``interp/run.py``)."""
    return [SlcFunctions()]


def counts(interp: Interpreter) -> dict[str, Any]:
    """The SLC counters of a finished run."""
    return {k: interp.counters[k] for k in (ELEMENTS, BYTES, CALLBACKS, ITERATIONS, ALU)}
