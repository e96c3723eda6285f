"""Run a lowered function (any level) on numpy inputs.

A lowered cluster is a ``Module`` whose entry function takes the custom-call's operands as
memrefs, then one memref per output, and ends in ``func.return``. Its attributes say which is
which: ``num_inputs`` (how many leading arguments are inputs) and ``output_shapes`` (one
``[d0, d1, ...]`` list per output; the element type is the memref's). ``run`` binds the inputs
(checking dtype and rank), allocates the outputs poisoned with NaN (the program must write
every element, ``init`` included) — or, for an output the optional ``output_init`` attribute
(one input index or -1 per output) says is updated in place, as a copy of that input — runs
the entry function with the interpreters of the dialects it uses and returns the outputs.

Interpreter modules are found by dialect name: ``interp/<dialect>.py`` exporting
``functions() -> list[InterpreterFunctions]`` (func/arith/scf/memref/vector -> ``execute``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, InterpretError, Listener
from ember_xla.ir.types import MemRefType, numpy_dtype

_EXECUTE = ("func", "arith", "scf", "memref", "vector")


def interpreter_modules(module: Module) -> list[str]:
    """Names of the interpreter modules needed for the dialects ``module`` uses."""
    names: list[str] = ["execute"]
    for op in module.walk():
        prefix = op.opcode.partition(".")[0]
        name = "execute" if prefix in _EXECUTE else prefix
        if name not in names:
            names.append(name)
    return names


def functions_for(module: Module) -> list[InterpreterFunctions]:
    out: list[InterpreterFunctions] = []
    for name in interpreter_modules(module):
        try:
            mod = importlib.import_module(f"ember_xla.dae_target.interp.{name}")
        except ModuleNotFoundError as e:
            raise InterpretError(f"no interpreter for dialect {name!r}") from e
        out.extend(mod.functions())
    return out


def make_interpreter(module: Module, listeners: Iterable[Listener] = ()) -> Interpreter:
    """An interpreter with the function sets ``module`` needs."""
    import ember_xla.dae_target.dialects  # noqa: F401  (registers the dialects)

    return Interpreter(functions_for(module), listeners)


def _bind_input(x: Any, t: Any, i: int) -> np.ndarray:
    if not isinstance(t, MemRefType):
        raise InterpretError(f"argument {i} has type {t}: only memref arguments are bound")
    arr = np.asarray(x)
    want = numpy_dtype(t.elem)
    if arr.dtype != want or arr.ndim != t.rank:
        raise InterpretError(f"input {i}: got {arr.dtype}{list(arr.shape)}, function wants {t}")
    return np.array(arr, order="C", copy=True)  # (ascontiguousarray makes 0-d arrays 1-d)


def outputs_of(graph: Graph) -> list[tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of each output of a lowered function."""
    n_in = int(graph.attributes["num_inputs"])
    shapes = graph.attributes["output_shapes"]
    out_args = graph.args[n_in:]
    if len(out_args) != len(shapes):
        raise InterpretError(f"{graph.name}: {len(out_args)} output arguments for "
                             f"{len(shapes)} output shapes")
    return [(tuple(int(d) for d in s), numpy_dtype(a.type.elem))
            for s, a in zip(shapes, out_args, strict=True)]


def run_counted(module: Module, inputs: Sequence[Any], function: str | None = None,
                listeners: Iterable[Listener] = ()) -> tuple[list[np.ndarray], dict[str, int]]:
    """Run the entry function (or ``function``); returns (outputs, interpreter counters)."""
    graph = module.graph(function) if function else module.entry
    if graph is None:
        raise InterpretError(f"module {module.name} has no entry function")
    n_in = int(graph.attributes["num_inputs"])
    if len(inputs) != n_in:
        raise InterpretError(f"{graph.name} takes {n_in} inputs, got {len(inputs)}")
    args = [_bind_input(x, a.type, i)
            for i, (x, a) in enumerate(zip(inputs, graph.args[:n_in], strict=True))]
    init = graph.attributes.get("output_init") or [-1] * len(outputs_of(graph))
    outs = [args[i].copy() if i >= 0 else np.full(shape, np.nan, dtype=dt)
            for (shape, dt), i in zip(outputs_of(graph), init, strict=True)]
    interp = make_interpreter(module, listeners)
    interp.run_graph(graph, args + outs)
    return outs, dict(interp.counters)


def run(module: Module, inputs: Sequence[Any], function: str | None = None) -> list[np.ndarray]:
    """Run the entry function on ``inputs``; returns the output arrays."""
    return run_counted(module, inputs, function)[0]
