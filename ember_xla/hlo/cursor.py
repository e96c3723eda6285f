"""A character cursor over HLO text with line:column errors, plus the small value grammars
(names, numbers, strings, integer lists, shapes) that the text parser and attribute codecs share.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo.shape import ELEMENT_TYPES, Shape

T = TypeVar("T")

_NAME = re.compile(r"%?[A-Za-z_$][\w.\-$]*")
_WS = re.compile(r"(?:[ \t\r\n]+|/\*.*?\*/|//[^\n]*)*", re.S)
_WS_START = " \t\r\n/"
_NUMBER = re.compile(r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:\([^)]*\))?")
_FOUND = re.compile(r"\S{1,20}")
_WORD = re.compile(r"[\w.\-+>$]+")
_INTEGER = re.compile(r"[-+]?\d+")
_ELEMENT_TYPE = re.compile(r"[a-z][a-z0-9]*")
# Fast paths. Each matches only text that the general code reads the same way and to the same
# end position; anything else (comments, odd spacing, escapes ...) takes the general code.
_SIMPLE_STRING = re.compile(r'"([^"\\]*)"')
_INT_LIST = re.compile(r"\{([-+]?[0-9]+(?:,[-+]?[0-9]+)*)?\}")
# An array shape without spaces, dynamic dimensions or layout details: its text is its cache key.
SIMPLE_SHAPE = (r"[a-z][a-z0-9]*\[(?:[0-9]+(?:,[0-9]+)*)?\]"
                r"(?:\{(?:[0-9]+(?:,[0-9]+)*)?\}|(?!\{))")
_SIMPLE_SHAPE = re.compile(SIMPLE_SHAPE)
_BALANCED_STOP = re.compile(r'[{}"]')
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.S)


class Cursor:
    def __init__(self, text: str, path: str | None = None) -> None:
        self.text = text
        self.pos = 0
        self.path = path
        self.shapes: dict[str, Shape] = {}  # simple shape text -> Shape (see shape())

    # -- positions and errors -----------------------------------------------------------------
    def location(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return line, col

    def error(self, message: str, pos: int | None = None) -> HloImportError:
        line, col = self.location(pos)
        return HloImportError(message, self.path, line, col)

    def found(self) -> str:
        if self.at_end():
            return "end of input"
        m = _FOUND.match(self.text, self.pos)
        return repr(m.group(0)) if m else repr(self.text[self.pos])

    # -- whitespace and punctuation ----------------------------------------------------------
    def skip_ws(self) -> None:
        t, pos = self.text, self.pos
        if pos < len(t) and t[pos] not in _WS_START:
            return
        self.pos = _WS.match(t, pos).end()
        if t.startswith("/*", self.pos):
            raise self.error("unterminated /* comment")

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def peek(self, s: str) -> bool:
        t, pos = self.text, self.pos
        if pos < len(t) and t[pos] in _WS_START:
            self.skip_ws()
            pos = self.pos
        return t.startswith(s, pos)

    def eat(self, s: str) -> bool:
        t, pos = self.text, self.pos
        if pos < len(t) and t[pos] in _WS_START:
            self.skip_ws()
            pos = self.pos
        if t.startswith(s, pos):
            self.pos = pos + len(s)
            return True
        return False

    def expect(self, s: str, what: str = "") -> None:
        if not self.eat(s):
            raise self.error(f"expected {s!r}{' ' + what if what else ''}, found {self.found()}")

    # -- tokens ------------------------------------------------------------------------------
    def name(self, what: str = "a name") -> str:
        self.skip_ws()
        m = _NAME.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m.group(0).lstrip("%")

    def word(self) -> str:
        """A bare word such as ``kLoop``, ``LT``, ``b01f_01io->b01f`` or ``0_0x1_1``."""
        self.skip_ws()
        m = _WORD.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected a value, found {self.found()}")
        self.pos = m.end()
        return m.group(0)

    def integer(self) -> int:
        self.skip_ws()
        m = _INTEGER.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected an integer, found {self.found()}")
        self.pos = m.end()
        return int(m.group(0))

    def number_token(self) -> str:
        self.skip_ws()
        for lit in ("true", "false"):
            if self.text.startswith(lit, self.pos):
                self.pos += len(lit)
                return lit
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected a number, found {self.found()}")
        self.pos = m.end()
        return m.group(0)

    def string(self) -> str:
        self.skip_ws()
        if not self.text.startswith('"', self.pos):
            raise self.error(f"expected a string, found {self.found()}")
        m = _SIMPLE_STRING.match(self.text, self.pos)
        if m:  # no escapes
            self.pos = m.end()
            return m.group(1)
        i = self.pos + 1
        out: list[str] = []
        t = self.text
        while i < len(t) and t[i] != '"':
            if t[i] == "\\" and i + 1 < len(t):
                nxt = t[i + 1]
                simple = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r"}
                if nxt in simple:
                    out.append(simple[nxt])
                    i += 2
                elif nxt == "x":
                    out.append(chr(int(t[i + 2:i + 4], 16)))
                    i += 4
                elif nxt in "01234567":
                    j = i + 1
                    while j < min(i + 4, len(t)) and t[j] in "01234567":
                        j += 1
                    out.append(chr(int(t[i + 1:j], 8)))
                    i = j
                else:
                    out.append(nxt)
                    i += 2
            else:
                out.append(t[i])
                i += 1
        if i >= len(t):
            raise self.error("unterminated string")
        self.pos = i + 1
        return "".join(out)

    def braced(self, item: Callable[[], T]) -> list[T]:
        """``{a, b, ...}``: ``item()`` reads each element (commas optional, a trailing one
        allowed)."""
        self.expect("{")
        out: list[T] = []
        while not self.eat("}"):
            out.append(item())
            self.eat(",")
        return out

    def int_list(self, open_: str = "{", close: str = "}") -> list[int]:
        if open_ == "{" and close == "}":
            self.skip_ws()
            m = _INT_LIST.match(self.text, self.pos)
            if m:
                self.pos = m.end()
                body = m.group(1)
                return [int(x) for x in body.split(",")] if body else []
        self.expect(open_)
        out: list[int] = []
        if self.eat(close):
            return out
        while True:
            out.append(self.integer())
            if self.eat(close):
                return out
            self.expect(",", "between integers")

    def balanced(self) -> str:
        """The raw text of a balanced ``{...}`` group (string-aware), braces included."""
        self.skip_ws()
        start = self.pos
        if not self.text.startswith("{", start):
            raise self.error(f"expected '{{', found {self.found()}")
        depth, i, t = 0, start, self.text
        stop = _BALANCED_STOP.search
        while True:
            m = stop(t, i)
            if m is None:
                break
            i = m.start()
            c = t[i]
            if c == '"':
                i = _STRING_BODY.match(t, i + 1).end()
                if i >= len(t):
                    break
                # t[i] is the closing quote (a lone trailing backslash runs to the end)
                if t[i] != '"':
                    break
            elif c == "{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return t[start:i + 1]
            i += 1
        raise self.error("unbalanced '{'", start)

    # -- shapes ------------------------------------------------------------------------------
    def shape(self) -> Shape:
        self.skip_ws()
        m = _SIMPLE_SHAPE.match(self.text, self.pos)
        if m is not None:
            key = m.group(0)
            s = self.shapes.get(key)
            if s is None:
                s = self._shape()
                if self.pos == m.end():
                    self.shapes[key] = s
            else:
                self.pos = m.end()
            return s
        return self._shape()

    def _shape(self) -> Shape:
        if self.eat("("):
            parts: list[Shape] = []
            if not self.eat(")"):
                while True:
                    parts.append(self.shape())
                    if self.eat(")"):
                        break
                    self.expect(",", "between tuple element shapes")
            return Shape.tuple_of(parts)
        start = self.pos
        m = _ELEMENT_TYPE.match(self.text, self.pos)
        if not m or m.group(0) not in ELEMENT_TYPES:
            raise self.error(f"expected a shape such as f32[2,3], found {self.found()}")
        et = m.group(0)
        self.pos = m.end()
        if not self.text.startswith("[", self.pos):
            raise self.error(f"expected '[' after element type {et}", start)
        self.pos += 1
        dims: list[int] = []
        dyn: list[bool] = []
        if not self.eat("]"):
            while True:
                is_dyn = self.eat("<=") or self.eat("?")
                dims.append(self.integer() if not self.text.startswith("]", self.pos) else -1)
                dyn.append(is_dyn)
                if self.eat("]"):
                    break
                self.expect(",", "between dimensions")
        layout = None
        if self.text.startswith("{", self.pos):
            self.pos += 1
            layout_list: list[int] = []
            if not self.eat("}"):
                while True:
                    layout_list.append(self.integer())
                    if self.eat("}"):
                        break
                    if self.peek(":"):
                        raise self.error("layouts with tiling or memory space are not supported")
                    self.expect(",", "in layout")
            layout = tuple(layout_list)
        elif et not in ("token", "opaque"):
            layout = None
        return Shape(et, tuple(dims), layout, (), tuple(dyn) if any(dyn) else ())
