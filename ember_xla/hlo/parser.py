"""Our HLO text parser: XLA's text syntax -> ``ir.Module`` (HLO dialect).

Accepts what XLA prints and dumps: ``%``-prefixed or bare names, long-form operands with shapes,
``/*index=N*/`` comments, computation signatures, the stack-frame sections, and every attribute
``hlo.attr_parse`` knows. Errors carry ``file:line:col`` and say what was expected.
"""

from __future__ import annotations

import re
from typing import Any

import ember_xla.hlo.attr_parse_meta  # noqa: F401  (registers the structured attributes)
from ember_xla.hlo.attr_parse import parse_attr
from ember_xla.hlo.cursor import SIMPLE_SHAPE, Cursor
from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo.literal_text import parse_literal
from ember_xla.hlo.module_header import SECTIONS, header_attr, section
from ember_xla.hlo.opcodes import OPCODES
from ember_xla.hlo.shape import ELEMENT_TYPES, Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.util.nogc import gc_paused

_CALLEE_ATTRS = {"to_apply", "calls", "condition", "body", "true_computation",
                 "false_computation", "branch_computations", "called_computations", "select",
                 "scatter"}
_SHAPE_START = re.compile(r"([a-z][a-z0-9]*)\[")
_SECTION_WORD = re.compile(r"[A-Za-z]+")
_CALLEE_ORDER = {"condition": 1, "body": 0, "false_computation": 1, "scatter": 1}

# Fast paths for the common spelling of an instruction (names without '%', plain spaces, simple
# shapes). They only accept text the general code reads the same way, to the same position;
# anything else, including every error, goes through the general code.
_IDENT = r"[A-Za-z_$][A-Za-z0-9_.\-$]*+"  # ASCII names; others take the general code
_HEAD = re.compile(
    r"[ \t]*%?(" + _IDENT + r")[ \t]*=[ \t]*("
    + SIMPLE_SHAPE + r"|\((?:" + SIMPLE_SHAPE + r"(?:, " + SIMPLE_SHAPE + r")*)?\))"
    r"[ \t]*%?(" + _IDENT + r")\(")
_OPERANDS = re.compile(
    r"[ \t]*(?:\)|(%?" + _IDENT + r"(?:[ \t]*,[ \t]*%?" + _IDENT + r")*)[ \t]*\))")
_ATTR = re.compile(r"[ \t]*,([ \t]*)(" + _IDENT + r")[ \t]*=")


class _Parser:
    def __init__(self, text: str, path: str | None, elided_ok: bool = False) -> None:
        self.c = Cursor(text, path)
        self.path = path
        self.elided_ok = elided_ok
        self.elided: list[str] = []  # "name shape" of each constant printed as {...}
        self.shapes: dict[str, Shape] = {}  # instruction shape text -> Shape with layout
        self.starts: dict[tuple[str, str], int] = {}  # (computation, instruction) -> text offset

    # -- module ------------------------------------------------------------------------------
    def module(self) -> Module:
        c = self.c
        if not c.eat("HloModule"):
            raise c.error(f"expected 'HloModule' at the start of HLO text, found {c.found()}")
        m = Module(c.name("a module name"))
        while c.eat(","):
            header_attr(c, m)
        calls: list[tuple[Operation, str, list[str], int]] = []
        entry: Graph | None = None
        while not c.at_end():
            word_pos = c.pos
            m2 = _SECTION_WORD.match(c.text, c.pos)
            if m2 and m2.group(0) in SECTIONS and c.text[m2.end():m2.end() + 1] in "\r\n":
                c.pos = m2.end()
                section(c, m, SECTIONS[m2.group(0)])
                continue
            is_entry = c.eat("ENTRY")
            g = self.computation(calls)
            if any(x.name == g.name for x in m.graphs):
                raise c.error(f"duplicate computation name {g.name!r}", word_pos)
            m.graphs.append(g)
            if is_entry:
                if entry is not None:
                    raise c.error("more than one ENTRY computation", word_pos)
                entry = g
        if not m.graphs:
            raise c.error("expected at least one computation")
        by_name = {g.name: g for g in m.graphs}
        for op, attr, names, pos, _ in sorted(calls, key=lambda x: x[4]):
            for n in names:
                if n not in by_name:
                    raise c.error(f"{attr}={n}: no computation named {n!r}", pos)
            op.callees.extend(by_name[n] for n in names)
        m.entry = entry or m.graphs[-1]
        m.uniquify_op_names()  # as XLA's parser does: names are unique module-wide
        return m

    # -- computations ------------------------------------------------------------------------
    def computation(self, calls: list) -> Graph:
        c = self.c
        g = Graph(c.name("a computation name"))
        if c.peek("("):  # optional signature: (p: shape, ...) -> shape
            c.expect("(")
            while not c.eat(")"):
                c.name("a parameter name")
                c.expect(":")
                c.shape()
                c.eat(",")
            c.expect("->")
            c.shape()
        if c.eat(","):
            key = c.name()
            c.expect("=")
            if key != "execution_thread":
                raise c.error(f"unsupported computation attribute {key!r}")
            g.attributes["execution_thread"] = c.string()
        c.expect("{", f"to open computation {g.name}")
        values: dict[str, Operation] = {}
        root: Operation | None = None
        while not c.eat("}"):
            if c.at_end():
                raise c.error(f"expected '}}' to close computation {g.name}")
            op, is_root = self.instruction(g, values, calls)
            if is_root:
                if root is not None:
                    raise c.error(f"computation {g.name} has more than one ROOT")
                root = op
        if not g.ops:
            raise c.error(f"computation {g.name} has no instructions")
        g.root = root or g.ops[-1]
        return g

    def instruction(self, g: Graph, values: dict[str, Operation], calls: list):
        c = self.c
        start = c.pos
        head = self._fast_head(values)
        if head is None:
            head = self._head(values)
        is_root, name, shape, opcode = head
        attrs: dict[str, Any] = {}
        operands = []
        if opcode == "parameter":
            attrs["parameter_number"] = c.integer()
            c.expect(")")
        elif opcode == "constant":
            if self.elided_ok and c.eat("{...}"):
                self.elided.append(f"{name} {shape}")  # kept without a literal: no values
            else:
                attrs["literal"] = parse_literal(c, shape)
            c.expect(")", "to close the constant literal")
        else:
            m = _OPERANDS.match(c.text, c.pos)
            refs = m.group(1) if m else None
            if refs is not None:
                try:
                    operands = [values[r.strip(" \t").lstrip("%")] for r in refs.split(",")]
                    c.pos = m.end()
                except KeyError:  # the general code reports it
                    m = None
            elif m:
                c.pos = m.end()
            if m is None:
                while not c.eat(")"):
                    operands.append(self.operand(values, name))
                    if not c.peek(")"):
                        c.expect(",", "between operands")
        op = Operation(opcode, [v.result for v in operands], [shape], attrs, [], name)
        text = c.text
        while True:
            m = _ATTR.match(text, c.pos)
            if m is not None:
                apos = m.start(1)
                key = m.group(2)
                c.pos = m.end()
            elif c.eat(","):
                apos = c.pos
                key = c.name("an attribute name")
                c.expect("=", f"after attribute {key}")
            else:
                break
            if key in _CALLEE_ATTRS:
                if c.peek("{"):
                    names = c.braced(lambda: c.name("a computation name"))
                else:
                    names = [c.name("a computation name")]
                calls.append((op, key, names, apos, _CALLEE_ORDER.get(key, 0)))
            else:
                parse_attr(key, c, op.attributes, opcode)
        g.insert(len(g.ops), op)
        values[name] = op
        self.starts[(g.name, name)] = start
        return op, is_root

    def _fast_head(self, values: dict[str, Operation]) -> tuple[bool, str, Shape, str] | None:
        """``[ROOT] name = shape opcode(`` in its common spelling, else None (nothing read)."""
        c = self.c
        t, pos = c.text, c.pos
        is_root = t.startswith("ROOT", pos)
        m = _HEAD.match(t, pos + 4 if is_root else pos)
        if m is None:
            return None
        name, shape_text, opcode = m.group(1, 2, 3)
        if name in values or opcode not in OPCODES:
            return None  # the general code reports it
        shape = self.shapes.get(shape_text)
        if shape is None:
            c.pos = m.start(2)
            shape = c.shape().laid_out()
            if c.pos != m.end(2):
                c.pos = pos
                return None
            self.shapes[shape_text] = shape
        c.pos = m.end()
        return is_root, name, shape, opcode

    def _head(self, values: dict[str, Operation]) -> tuple[bool, str, Shape, str]:
        c = self.c
        is_root = c.eat("ROOT")
        name_pos = c.pos
        name = c.name("an instruction name")
        if name in values:
            raise c.error(f"duplicate instruction name {name!r}", name_pos)
        c.expect("=", f"after instruction name {name}")
        shape = c.shape().laid_out()
        op_pos = c.pos
        opcode = c.name("an opcode")
        if opcode not in OPCODES:
            raise c.error(f"unknown opcode {opcode!r}", op_pos)
        c.expect("(", f"after opcode {opcode}")
        return is_root, name, shape, opcode

    def operand(self, values: dict[str, Operation], user: str) -> Operation:
        c = self.c
        c.skip_ws()
        m = _SHAPE_START.match(c.text, c.pos)
        if c.peek("(") or (m and m.group(1) in ELEMENT_TYPES):
            c.shape()  # long form: the operand's shape precedes its name
        pos = c.pos
        ref = c.name("an operand name")
        if ref not in values:
            raise c.error(f"instruction {user}: operand {ref!r} is not defined before it", pos)
        return values[ref]

class Located:
    """Where each instruction of a parsed text starts: ``where(computation, name)`` gives
    (line, column) of its first character, computed only when asked (on an error)."""

    def __init__(self, text: str, starts: dict[tuple[str, str], int]) -> None:
        self.elided: list[str] = []  # constants without values (parse_module_located)
        self.text = text
        self.starts = starts

    def where(self, computation: str, name: str) -> tuple[int, int]:
        pos = self.starts.get((computation, name))
        if pos is None:
            return 0, 0
        m = re.compile(r"[ \t\r\n]*").match(self.text, pos)
        pos = m.end() if m else pos
        line = self.text.count("\n", 0, pos) + 1
        return line, pos - (self.text.rfind("\n", 0, pos) + 1) + 1


def parse_module_located(text: str, path: str | None = None, elided_ok: bool = False
                         ) -> tuple[Module, Located]:
    """``parse_module`` plus where each instruction starts (for verifier errors). With
    ``elided_ok``, a constant XLA printed without its values (``{...}``) is kept with no
    ``literal`` attribute and listed in ``Located.elided`` (for commands that need no values,
    like ``inspect``); without it, it is an error at its line:column."""
    try:
        with gc_paused():
            p = _Parser(text, path, elided_ok)
            m = p.module()
            located = Located(text, p.starts)
            located.elided = p.elided
            return m, located
    except HloImportError:
        raise
    except RecursionError:
        raise HloImportError("HLO text is nested too deeply", path) from None


def parse_module(text: str, path: str | None = None) -> Module:
    """Parse HLO text into an ``ir.Module``; raises ``HloImportError`` with line:column."""
    return parse_module_located(text, path)[0]
