"""An interpreter framework on which each IR level's reference interpreter is written.

Per-op implementations live in ``InterpreterFunctions`` classes, one per dialect, as methods
marked ``@impl("slc.for")``; an ``Interpreter`` collects them into a registry keyed by opcode.
An implementation gets the interpreter, the op and the values of its operands and returns the
values of its results (a tuple). A terminator's implementation returns the values its block
yields to the enclosing op (``run_block`` / ``run_region`` hand them back). Listeners see every
op before it runs and share ``Interpreter.counters`` (ops run, stream elements, queue bytes ...).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ember_xla.ir.block import Block, Region
from ember_xla.ir.graph import Graph
from ember_xla.ir.operation import Operation
from ember_xla.ir.traits import IsTerminator
from ember_xla.ir.value import Value

Impl = Callable[[Any, "Interpreter", Operation, tuple[Any, ...]], tuple[Any, ...]]


class InterpretError(RuntimeError):
    """The program cannot be run (unknown op, undefined value, bad operand)."""


def impl(opcode: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a method of an ``InterpreterFunctions`` class as the implementation of ``opcode``."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn._ember_impl = opcode  # type: ignore[attr-defined]
        return fn

    return mark


class InterpreterFunctions:
    """A dialect's op implementations (methods marked with ``@impl``). Instances may keep
    state (an access engine's queues); ``implementations`` lists what they provide."""

    def implementations(self) -> dict[str, Callable[..., tuple[Any, ...]]]:
        out: dict[str, Callable[..., tuple[Any, ...]]] = {}
        for klass in reversed(type(self).__mro__):
            for attr in vars(klass).values():
                opcode = getattr(attr, "_ember_impl", None)
                if opcode is not None:
                    out[opcode] = getattr(self, attr.__name__)
        return out


class Listener:
    """Sees each op before it runs (override ``before_op``)."""

    def before_op(self, interp: Interpreter, op: Operation, args: tuple[Any, ...]) -> None:
        pass


class OpCounter(Listener):
    """Counts ops run, by opcode, into ``interp.counters['op:<opcode>']``."""

    def before_op(self, interp: Interpreter, op: Operation, args: tuple[Any, ...]) -> None:
        interp.counters["op:" + op.opcode] += 1


class Interpreter:
    def __init__(self, functions: Iterable[InterpreterFunctions] = (),
                 listeners: Iterable[Listener] = ()) -> None:
        self.impls: dict[str, Callable[..., tuple[Any, ...]]] = {}
        self.functions: list[InterpreterFunctions] = []
        for f in functions:
            self.register(f)
        self.listeners = list(listeners)
        self.env: dict[Value, Any] = {}
        self.counters: collections.Counter[str] = collections.Counter()

    def register(self, functions: InterpreterFunctions) -> None:
        self.functions.append(functions)
        self.impls.update(functions.implementations())

    def get_functions(self, cls: type) -> Any:
        """The registered functions object of class ``cls`` (for its state)."""
        for f in self.functions:
            if isinstance(f, cls):
                return f
        raise InterpretError(f"no {cls.__name__} registered")

    def count(self, event: str, n: int = 1) -> None:
        self.counters[event] += n

    # -- values -----------------------------------------------------------------------------
    def value(self, v: Value) -> Any:
        try:
            return self.env[v]
        except KeyError:
            owner = getattr(v.owner, "opcode", "a block argument")
            raise InterpretError(f"value {v!r} (of {owner}) has not been computed") from None

    def set_values(self, values: Sequence[Value], data: Sequence[Any]) -> None:
        if len(values) != len(data):
            raise InterpretError(f"{len(data)} values for {len(values)} results")
        for v, d in zip(values, data, strict=True):
            self.env[v] = d

    # -- running ----------------------------------------------------------------------------
    def run_op(self, op: Operation) -> tuple[Any, ...]:
        fn = self.impls.get(op.opcode)
        if fn is None:
            raise InterpretError(f"no interpreter implementation for {op.opcode}")
        env = self.env
        try:
            args = tuple([env[v] for v in op.operands])
        except KeyError:
            args = tuple(self.value(v) for v in op.operands)  # raises the named error
        for lst in self.listeners:
            lst.before_op(self, op, args)
        out = fn(self, op, args)
        out = () if out is None else tuple(out)
        if not op.has_trait(IsTerminator):
            results = op.results
            if len(results) != len(out):
                raise InterpretError(f"{op.opcode}: {len(out)} values for "
                                     f"{len(results)} results")
            for v, d in zip(results, out, strict=True):
                env[v] = d
        return out

    def run_block(self, block: Block, args: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Bind the block's arguments, run its ops; returns what its terminator yields."""
        self.set_values(block.args, list(args))
        out: tuple[Any, ...] = ()
        for op in block.ops:
            res = self.run_op(op)
            if op.has_trait(IsTerminator):
                out = res
        return out

    def run_region(self, region: Region, args: Sequence[Any] = ()) -> tuple[Any, ...]:
        if len(region.blocks) != 1:
            raise InterpretError("only single-block regions can be run")
        return self.run_block(region.blocks[0], args)

    def run_graph(self, graph: Graph, args: Sequence[Any]) -> tuple[Any, ...]:
        if len(args) != len(graph.args):
            raise InterpretError(f"{graph.name} takes {len(graph.args)} arguments, "
                                 f"got {len(args)}")
        return self.run_block(graph, args)
