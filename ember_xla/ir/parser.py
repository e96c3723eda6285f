"""Parser of the generic text form written by ``ir.printer`` (see there for the grammar).
Errors are ``IRParseError`` with ``line:col`` and what was expected."""

from __future__ import annotations

import json
import re
from typing import Any

from ember_xla.ir.attributes import SymbolRef
from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import op_class, type_class
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import (
    DialectType,
    FloatType,
    IndexType,
    IntegerType,
    MemRefType,
    Type,
    VectorType,
)
from ember_xla.ir.value import Value


class IRParseError(ValueError):
    """Bad IR text; the message starts with ``file:line:col``."""


_WS = re.compile(r"(?:\s|//[^\n]*)*")
_NAME = re.compile(r"[A-Za-z0-9_.$-]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
_NUMBER = re.compile(r"-?(?:[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|[0-9]+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_INT_TYPE = re.compile(r"i[0-9]+$")


class Parser:
    def __init__(self, text: str, source: str = "<text>") -> None:
        self.text = text
        self.pos = 0
        self.source = source
        self.scope: dict[str, Value] = {}
        self.pending_callees: list[tuple[Operation, list[SymbolRef], int]] = []

    # -- low level --------------------------------------------------------------------------
    def error(self, msg: str, pos: int | None = None) -> IRParseError:
        p = self.pos if pos is None else pos
        line = self.text.count("\n", 0, p) + 1
        col = p - (self.text.rfind("\n", 0, p) + 1) + 1
        return IRParseError(f"{self.source}:{line}:{col}: {msg}")

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str = "") -> None:
        if not self.accept(s):
            found = self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"
            raise self.error(f"expected {what or repr(s)}, found {found!r}")

    def regex(self, rx: re.Pattern[str], what: str) -> str:
        self.skip()
        m = rx.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"
            raise self.error(f"expected {what}, found {found!r}")
        self.pos = m.end()
        return m.group(0)

    def keyword(self, word: str) -> bool:
        self.skip()
        m = _IDENT.match(self.text, self.pos)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    # -- types ------------------------------------------------------------------------------
    def type(self) -> Type:
        self.skip()
        start = self.pos
        if self.accept("!"):
            name = self.regex(_IDENT, "a dialect type name")
            params: list[Any] = []
            if self.accept("<"):
                while True:
                    params.append(self.type_param())
                    if self.accept(">"):
                        break
                    self.expect(",", "',' or '>'")
            cls = type_class(name)
            if cls is not None:
                try:
                    return cls(name, tuple(params))
                except (TypeError, ValueError) as e:
                    raise self.error(f"bad type !{name}: {e}", start) from None
            return DialectType(name, tuple(params))
        word = self.regex(_IDENT, "a type")
        if word == "index":
            return IndexType()
        if _INT_TYPE.match(word):
            return IntegerType(int(word[1:]))
        if word in FloatType.KINDS:
            return FloatType(word)
        if word in ("vector", "memref"):
            self.expect("<")
            dims: list[int | None] = []
            while True:
                self.skip()
                if self.accept("?"):
                    dims.append(None)
                else:
                    m = re.compile(r"[0-9]+(?=x)").match(self.text, self.pos)
                    if not m:
                        break
                    dims.append(int(m.group(0)))
                    self.pos = m.end()
                self.expect("x")
            elem = self.type()
            self.expect(">")
            if word == "vector":
                if None in dims:
                    raise self.error("vector dims must be static", start)
                return VectorType(tuple(dims), elem)  # type: ignore[arg-type]
            return MemRefType(tuple(dims), elem)
        raise self.error(f"unknown type {word!r}", start)

    def type_param(self) -> Any:
        self.skip()
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return int(m.group(0))
        if self.peek("!") or self.peek("vector<") or self.peek("memref<"):
            return self.type()
        word_pos = self.pos
        word = self.regex(_IDENT, "a type parameter")
        self.pos = word_pos
        if word == "index" or _INT_TYPE.match(word) or word in FloatType.KINDS:
            return self.type()
        self.pos += len(word)
        return word

    def type_list(self) -> list[Type]:
        self.expect("(")
        out: list[Type] = []
        if self.accept(")"):
            return out
        while True:
            out.append(self.type())
            if self.accept(")"):
                return out
            self.expect(",", "',' or ')'")

    # -- attributes -------------------------------------------------------------------------
    def attr_value(self) -> Any:
        self.skip()
        if self.peek('"'):
            s = self.regex(_STRING, "a string")
            return json.loads(s)
        if self.accept("["):
            items: list[Any] = []
            if self.accept("]"):
                return items
            while True:
                items.append(self.attr_value())
                if self.accept("]"):
                    return items
                self.expect(",", "',' or ']'")
        if self.peek("{"):
            return self.attr_dict()
        if self.accept("@"):
            return SymbolRef(self.regex(_NAME, "a symbol name"))
        if self.accept("-inf"):
            return float("-inf")
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            s = m.group(0)
            return float(s) if ("." in s or "e" in s or "E" in s) else int(s)
        if self.peek("!"):
            return self.type()
        pos = self.pos
        word = self.regex(_IDENT, "an attribute value")
        consts = {"true": True, "false": False, "none": None, "inf": float("inf"),
                  "nan": float("nan")}
        if word in consts:
            return consts[word]
        self.pos = pos
        return self.type()

    def attr_dict(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            self.skip()
            if self.peek('"'):
                key = json.loads(self.regex(_STRING, "an attribute name"))
            else:
                key = self.regex(_IDENT, "an attribute name")
            self.expect("=")
            out[key] = self.attr_value()
            if self.accept("}"):
                return out
            self.expect(",", "',' or '}'")

    # -- values -----------------------------------------------------------------------------
    def define(self, name: str, v: Value, pos: int) -> None:
        if name in self.scope:
            raise self.error(f"%{name} is defined twice", pos)
        self.scope[name] = v

    def use(self) -> Value:
        self.skip()
        pos = self.pos
        self.expect("%", "a value (%name)")
        name = self.regex(_NAME, "a value name")
        if self.accept("#"):
            name += "#" + self.regex(re.compile(r"[0-9]+"), "a result number")
        if name not in self.scope:
            raise self.error(f"%{name} is not defined here", pos)
        return self.scope[name]

    def block_args(self, block: Block) -> None:
        self.expect("(")
        if self.accept(")"):
            return
        while True:
            self.skip()
            pos = self.pos
            self.expect("%", "an argument (%name)")
            name = self.regex(_NAME, "an argument name")
            self.expect(":")
            arg = block.add_arg(self.type(), name)
            self.define(name, arg, pos)
            if self.accept(")"):
                return
            self.expect(",", "',' or ')'")

    # -- ops, regions, graphs ---------------------------------------------------------------
    def op(self, block: Block) -> Operation:
        self.skip()
        start = self.pos
        base, nres = "", 0
        if self.accept("%"):
            base = self.regex(_NAME, "a result name")
            nres = 1
            if self.accept(":"):
                nres = int(self.regex(re.compile(r"[0-9]+"), "a result count"))
            self.expect("=")
        self.skip()
        opcode = json.loads(self.regex(_STRING, 'an op name in quotes ("dialect.op")'))
        self.expect("(")
        operands: list[Value] = []
        if not self.accept(")"):
            while True:
                operands.append(self.use())
                if self.accept(")"):
                    break
                self.expect(",", "',' or ')'")
        regions: list[Region] = []
        if self.accept("("):
            while True:
                regions.append(self.region())
                if self.accept(")"):
                    break
                self.expect(",", "',' or ')'")
        attrs = self.attr_dict() if self.peek("{") else {}
        self.expect(":", "':' and the op's type")
        self.skip()
        tpos = self.pos
        in_types = self.type_list()
        self.expect("->")
        out_types = self.type_list() if self.peek("(") else [self.type()]
        if len(in_types) != len(operands) or any(
                str(t) != str(v.type) for t, v in zip(in_types, operands, strict=False)):
            have = ", ".join(str(v.type) for v in operands)
            raise self.error(f"{opcode}: operand types ({have}) do not match the signature",
                             tpos)
        if len(out_types) != nres:
            raise self.error(f"{opcode}: {nres} result names for {len(out_types)} results",
                             start)
        callees = attrs.pop("callees", None)
        cls = op_class(opcode)
        if cls is not None and issubclass(cls, OpDef):
            op: Operation = cls.create(operands, out_types, attrs, regions, base)
        else:
            op = Operation(opcode, operands, out_types, attrs, None, base, regions)
        if callees is not None:
            self.pending_callees.append((op, callees, start))
        block.append(op)
        if nres == 1:
            self.define(base, op.results[0], start)
        else:
            for i, r in enumerate(op.results):
                self.define(f"{base}#{i}", r, start)
        return op

    def region(self) -> Region:
        self.expect("{")
        region = Region()
        block = Block()
        region.add_block(block)
        first = True
        while not self.accept("}"):
            if self.peek("^"):
                self.expect("^")
                self.regex(_NAME, "a block label")
                if not first or block.ops:
                    block = Block()
                    region.add_block(block)
                self.block_args(block)
                self.expect(":")
            else:
                if self.pos >= len(self.text):
                    raise self.error("expected '}' closing the region")
                self.op(block)
            first = False
        return region

    def graph(self) -> Graph:
        if not self.keyword("func"):
            raise self.error("expected 'func' or '}'")
        self.expect("@")
        g = Graph(self.regex(_NAME, "a function name"))
        self.scope = {}
        self.block_args(g)
        if self.keyword("attributes"):
            g.attributes = self.attr_dict()
        self.expect("{")
        while not self.accept("}"):
            if self.pos >= len(self.text):
                raise self.error("expected '}' closing the function")
            self.op(g)
        return g

    def module(self) -> Module:
        if not self.keyword("module"):
            raise self.error("expected 'module'")
        self.expect("@")
        m = Module(self.regex(_NAME, "a module name"))
        attrs = self.attr_dict() if self.keyword("attributes") else {}
        entry = attrs.pop("entry", None)
        m.attributes = attrs
        self.expect("{")
        while not self.accept("}"):
            pos = self.pos
            g = self.graph()
            try:
                m.add(g)
            except ValueError as e:
                raise self.error(str(e), pos) from None
        self.skip()
        if self.pos != len(self.text):
            raise self.error("unexpected text after the module")
        by_name = {g.name: g for g in m.graphs}
        for op, refs, pos in self.pending_callees:
            for r in refs:
                if not isinstance(r, SymbolRef) or r.name not in by_name:
                    raise self.error(f"{op.opcode}: unknown callee {r}", pos)
                op.callees.append(by_name[r.name])
        if entry is not None:
            if not isinstance(entry, SymbolRef) or entry.name not in by_name:
                raise self.error(f"module entry {entry} is not a function of the module", 0)
            m.entry = by_name[entry.name]
        return m


def parse_module(text: str, source: str = "<text>") -> Module:
    """Parse a module in the generic text form."""
    return Parser(text, source).module()


def parse_type(text: str) -> Type:
    p = Parser(text)
    t = p.type()
    p.skip()
    if p.pos != len(text):
        raise p.error("unexpected text after the type")
    return t
