"""The generic text form of the IR (MLIR-like), for every dialect but HLO's own text:

    module @m attributes {entry = @f} {
      func @f(%a: memref<?xf32>, %n: index) {
        %0 = "slc.to_stream"(%n) : (index) -> !slc.stream<index>
        "slc.for"(%lb, %ub, %st) ({
        ^bb0(%i: !slc.stream<index>):
          "slc.yield"() : () -> ()
        }) {attr = 1} : (!slc.stream<index>, ...) -> ()
        "func.return"() : () -> ()
      }
    }

Results are named after ``op.name`` (numbered when empty), block arguments after their
``name_hint``; names are made unique per function. ``ir.parser`` reads this back, and
print -> parse -> print is a fixed point."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ember_xla.ir.attributes import SymbolRef
from ember_xla.ir.block import Block, Region
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import Type
from ember_xla.ir.value import Value

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$-]*$|^[0-9]+$")
_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def format_attr(v: Any) -> str:
    """The text of one attribute value."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Type | SymbolRef):
        return str(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, dict):
        return format_attr_dict(v)
    raise TypeError(f"attribute value {v!r} of type {type(v).__name__} has no text form")


def format_attr_dict(attrs: dict[str, Any]) -> str:
    items = []
    for k, v in attrs.items():
        key = k if _BARE_KEY.match(k) else json.dumps(k)
        items.append(f"{key} = {format_attr(v)}")
    return "{" + ", ".join(items) + "}"


class _Names:
    """Printed names of values, unique within one function."""

    def __init__(self) -> None:
        self.of: dict[Value, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    def _fresh(self, hint: str | None) -> str:
        if hint and _IDENT.match(hint) and hint not in self.taken:
            self.taken.add(hint)
            return hint
        if hint and _IDENT.match(hint):
            n = 1
            while f"{hint}_{n}" in self.taken:
                n += 1
            name = f"{hint}_{n}"
        else:
            while str(self.counter) in self.taken:
                self.counter += 1
            name = str(self.counter)
        self.taken.add(name)
        return name

    def define_results(self, op: Operation) -> str:
        base = self._fresh(op.name or None)
        if len(op.results) == 1:
            self.of[op.results[0]] = base
        else:
            for i, r in enumerate(op.results):
                self.of[r] = f"{base}#{i}"
        return base

    def define_arg(self, a: Value) -> str:
        self.of[a] = self._fresh(a.name_hint or f"arg{a.index}")
        return self.of[a]

    def use(self, v: Value) -> str:
        if v not in self.of:
            raise ValueError(f"value {v!r} is used before it is defined (or from another "
                             "function)")
        return self.of[v]


class Printer:
    def __init__(self, indent: str = "  ") -> None:
        self.indent = indent
        self.lines: list[str] = []

    def op(self, op: Operation, names: _Names, depth: int) -> None:
        pad = self.indent * depth
        operands = ", ".join("%" + names.use(v) for v in op.operands)
        lhs = ""
        if op.results:
            base = names.define_results(op)
            lhs = f"%{base}" + (f":{len(op.results)}" if len(op.results) > 1 else "") + " = "
        head = f"{pad}{lhs}{json.dumps(op.opcode)}({operands})"
        if not op.regions:
            self.lines.append(head + self._tail(op))
            return
        self.lines.append(head + " (")
        for ri, region in enumerate(op.regions):
            self.region(region, names, depth + 1, last=ri == len(op.regions) - 1)
        self.lines[-1] += f"){self._tail(op)}"

    def _tail(self, op: Operation) -> str:
        attrs = dict(op.attributes)
        if op.callees:
            attrs["callees"] = [SymbolRef(c.name) for c in op.callees]
        a = f" {format_attr_dict(attrs)}" if attrs else ""
        ins = ", ".join(str(v.type) for v in op.operands)
        outs = ", ".join(str(r.type) for r in op.results)
        outs = outs if len(op.results) == 1 else f"({outs})"
        return f"{a} : ({ins}) -> {outs}"

    def region(self, region: Region, names: _Names, depth: int, last: bool) -> None:
        pad = self.indent * (depth - 1)
        self.lines[-1] += "{"
        for i, b in enumerate(region.blocks):
            if b.args or i > 0:
                args = ", ".join(f"%{names.define_arg(a)}: {a.type}" for a in b.args)
                self.lines.append(f"{pad}^bb{i}({args}):")
            for op in b.ops:
                self.op(op, names, depth)
        self.lines.append(f"{pad}}}" + ("" if last else ", "))

    def graph(self, g: Graph, depth: int) -> None:
        pad = self.indent * depth
        names = _Names()
        args = ", ".join(f"%{names.define_arg(a)}: {a.type}" for a in g.args)
        attrs = f" attributes {format_attr_dict(g.attributes)}" if g.attributes else ""
        self.lines.append(f"{pad}func @{g.name}({args}){attrs} {{")
        for op in g.ops:
            self.op(op, names, depth + 1)
        self.lines.append(f"{pad}}}")

    def module(self, m: Module) -> str:
        attrs = dict(m.attributes)
        if m.entry is not None:
            attrs["entry"] = SymbolRef(m.entry.name)
        a = f" attributes {format_attr_dict(attrs)}" if attrs else ""
        self.lines.append(f"module @{m.name}{a} {{")
        for g in m.graphs:
            self.graph(g, 1)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"


def print_module(m: Module) -> str:
    """The generic text of module ``m``."""
    return Printer().module(m)


def print_op(op: Operation) -> str:
    """The text of one op (its operands from outside are named by their own hints)."""
    p = Printer()
    names = _Names()
    for v in _free_values(op):
        names.of[v] = names._fresh(v.name_hint or getattr(v.owner, "name", None) or None)
    p.op(op, names, 0)
    return "\n".join(p.lines)


def _free_values(op: Operation) -> list[Value]:
    inner: set[int] = set()
    for o in op.walk():
        inner.update(id(r) for r in o.results)
        for r in o.regions:
            for b in r.blocks:
                inner.update(id(a) for a in b.args)
    out: dict[int, Value] = {}
    for o in op.walk():
        for v in o.operands:
            if id(v) not in inner:
                out.setdefault(id(v), v)
    return list(out.values())


def print_block(block: Block) -> str:
    p = Printer()
    names = _Names()
    for a in block.args:
        names.define_arg(a)
    for op in block.ops:
        p.op(op, names, 0)
    return "\n".join(p.lines)
