"""Helpers shared by the SLC/SLCV optimization passes (vectorize, bufferize, simplify-mem,
hoist, dedup): constant streams, loop queries, and the ``PassReport`` a pass returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from ember_xla.ir.block import Block
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import OpResult, Value


@dataclasses.dataclass
class PassReport:
    """What a pass did: one line per change, and the candidates it left alone with why.
    ``str()`` gives the lines the CLI prints; truthiness = something changed."""

    name: str
    changes: list[str] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)

    def change(self, what: str) -> None:
        self.changes.append(what)

    def refuse(self, what: str) -> None:
        if what not in self.refused:
            self.refused.append(what)

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __str__(self) -> str:
        lines = [f"{self.name}: {len(self.changes)} change(s)"]
        lines += [f"  {c}" for c in self.changes]
        lines += [f"  left alone: {r}" for r in self.refused]
        return "\n".join(lines)


def defining_op(v: Value) -> Operation | None:
    return v.owner if isinstance(v, OpResult) else None


def constant_of(v: Value) -> object | None:
    """The constant behind ``v``: an ``arith.constant``, or ``slc.to_stream`` of one."""
    op = defining_op(v)
    if op is not None and op.opcode == "slc.to_stream":
        op = defining_op(op.operands[0])
    if op is not None and op.opcode == "arith.constant":
        return op.attributes.get("value")
    return None


def is_loop(op: Operation) -> bool:
    return op.opcode in ("slc.for", "slcv.for")


def has_nested_loop(block: Block) -> bool:
    return any(is_loop(o) for op in block.ops for o in op.walk())


def defined_inside(v: Value, op: Operation) -> bool:
    """Is ``v`` defined inside one of ``op``'s regions (at any depth)?"""
    b = v.defining_block
    while b is not None:
        p = b.parent_op
        if p is op:
            return True
        if p is None:
            return False
        b = p.parent
    return False


def uses_inside(op: Operation) -> Iterator[Value]:
    """Every operand of ``op`` and of the ops nested in it."""
    for o in op.walk():
        yield from o.operands


def top_level(graph: Graph, opcodes: tuple[str, ...]) -> list[Operation]:
    """The ops of ``graph``'s top level with one of ``opcodes`` (a list, so a pass may replace
    them while it goes)."""
    return [op for op in graph.ops if op.opcode in opcodes]


def loops(module: Module, opcode: str) -> list[Operation]:
    return [op for op in module.walk() if op.opcode == opcode]


def op_label(op: Operation) -> str:
    """A short human label: the opcode and the names of its block arguments, if any."""
    names = [a.name_hint for r in op.regions for b in r.blocks for a in b.args if a.name_hint]
    return op.opcode + (f" over %{names[0]}" if names else "")
