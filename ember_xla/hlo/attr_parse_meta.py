"""The structured attributes of HLO text: ``sharding={...}``, ``frontend_attributes={...}``,
``metadata={...}`` (one regex match for the common case) and ``control-predecessors={...}``,
registered with ``attr_parse.parser_for``."""

from __future__ import annotations

import re
from typing import Any

from ember_xla.hlo.attr_parse import parse_bool, parser_for
from ember_xla.hlo.cursor import Cursor


def _parse_sharding(c: Cursor) -> dict[str, Any]:
    c.expect("{")
    if c.peek("{") or c.peek("}"):
        parts = []
        while not c.eat("}"):
            parts.append(_parse_sharding(c))
            c.eat(",")
        return {"type": "TUPLE", "tuple_shardings": parts}
    w = c.word()
    if w == "replicated":
        out: dict[str, Any] = {"type": "REPLICATED"}
    elif w == "manual":
        out = {"type": "MANUAL"}
    elif w == "maximal":
        c.expect("device")
        c.expect("=")
        out = {"type": "MAXIMAL", "tile_assignment_dimensions": [1],
               "tile_assignment_devices": [c.integer()]}
    else:
        raise c.error(f"sharding {w!r} is not supported (only replicated, manual, maximal)")
    c.expect("}")
    return out


@parser_for("sharding")
def _p_sharding(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["sharding"] = _parse_sharding(c)


@parser_for("frontend_attributes")
def _p_frontend(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    m: dict[str, str] = {}
    while not c.eat("}"):
        key = c.name("a frontend attribute name")
        c.expect("=")
        # a value is a string, a word, or a JSON-like dict kept as its text (Shardy's meshes)
        m[key] = c.string() if c.peek('"') else c.balanced() if c.peek("{") else c.word()
        c.eat(",")
    a["frontend_attributes"] = {"map": m}


_META_INT = {"source_line", "source_end_line", "source_column", "source_end_column",
             "stack_frame_id", "size_of_generated_code_in_bytes",
             "size_of_memory_working_set_in_bytes"}


# ``{op_name="..." source_file="..." source_line=12}``: up to _META_FAST_MAX fields, without
# escapes, commas or line breaks, read by one match (the groups alternate key, value).
_META_FAST_MAX = 12


def _meta_fast_pattern() -> re.Pattern[str]:
    item = (r'[ \t]*([A-Za-z_][A-Za-z0-9_]*)='
            r'("[^"\\]*+"|[-+]?[0-9]++|(?:true|false)(?![\w.\-+>$]))')
    inner = ""
    for _ in range(_META_FAST_MAX):
        inner = "(?:" + item + inner + ")?"
    return re.compile(r"\{" + inner + r"[ \t]*\}")


_META_FAST = _meta_fast_pattern()


def _fast_metadata(groups: tuple[str | None, ...]) -> dict[str, Any] | None:
    """The fields of a ``_META_FAST`` match, or None when a value has the wrong kind for its
    field (the general code then reports it)."""
    m: dict[str, Any] = {}
    for i in range(0, len(groups), 2):
        key = groups[i]
        if key is None:
            break
        value = groups[i + 1]
        first = value[0]
        if key in _META_INT:
            if first == '"' or first == "t" or first == "f":
                return None
            m[key] = int(value)
        elif key == "profile_type":
            return None
        elif first == '"':
            m[key] = value[1:-1]
        elif first == "t" or first == "f":
            m[key] = first == "t"
        else:
            return None
    return m


@parser_for("metadata")
def _p_metadata(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.skip_ws()
    fast = _META_FAST.match(c.text, c.pos)
    if fast is not None:
        m = _fast_metadata(fast.groups())
        if m is not None:
            c.pos = fast.end()
            a["metadata"] = m
            return
    c.expect("{")
    m: dict[str, Any] = {}
    while not c.eat("}"):
        key = c.name("a metadata field")
        c.expect("=")
        if key in _META_INT:
            m[key] = c.integer()
        elif key == "profile_type":
            m[key] = c.braced(lambda: c.word().upper())
        elif c.peek('"'):
            m[key] = c.string()
        else:
            m[key] = parse_bool(c)
        c.eat(",")
    a["metadata"] = m


@parser_for("control-predecessors")
def _p_control(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["control_predecessors"] = c.braced(lambda: c.name("an instruction name"))


@parser_for("statistics", "origin")
def _p_ignored(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.balanced()
