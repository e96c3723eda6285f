"""The module-level parts of HLO text around the computations: the attributes of the
``HloModule`` line (aliasing, buffer donors, frontend attributes; layout and partitioning
fields XLA derives are skipped) and the stack-frame sections (``FileNames``, ``StackFrames``...)."""

from __future__ import annotations

import re
from typing import Any

from ember_xla.hlo.attr_parse import parse_attr
from ember_xla.hlo.cursor import Cursor
from ember_xla.ir.graph import Module

_HEADER_IGNORED = {"is_scheduled", "entry_computation_layout", "replica_count",
                   "num_partitions", "allow_spmd_sharding_propagation_to_parameters",
                   "allow_spmd_sharding_propagation_to_output", "alias_passthrough_params",
                   "use_auto_spmd_partitioning"}
SECTIONS = {"FileNames": "file_names", "FunctionNames": "function_names",
            "FileLocations": "file_locations", "StackFrames": "stack_frames"}
_SECTION_ITEM = re.compile(r"\d+\s")


def header_attr(c: Cursor, m: Module) -> None:
    """One ``key=value`` of the ``HloModule`` line (after its comma) into ``m.attributes``."""
    pos = c.pos
    key = c.name("a module attribute")
    c.expect("=")
    if key in _HEADER_IGNORED:
        if c.peek("{"):
            c.balanced()
        else:
            c.word()
    elif key == "input_output_alias":
        m.attributes["input_output_alias"] = {"entries": _alias_entries(c, True)}
    elif key == "buffer_donor":
        m.attributes["buffer_donor"] = {"entries": _alias_entries(c, False)}
    elif key == "frontend_attributes":
        tmp: dict[str, Any] = {}
        parse_attr("frontend_attributes", c, tmp, "module")
        m.attributes["frontend_attributes"] = tmp["frontend_attributes"]
    else:
        raise c.error(f"unsupported module attribute {key!r}", pos)


def _alias_entries(c: Cursor, with_output: bool) -> list[dict[str, Any]]:
    def entry() -> dict[str, Any]:
        e: dict[str, Any] = {}
        if with_output:
            e["output_shape_index"] = c.int_list()
            c.expect(":")
        c.expect("(")
        e["parameter_number"] = c.integer()
        c.expect(",")
        e["parameter_shape_index"] = c.int_list()
        if c.eat(","):
            e["kind"] = c.word().upper().replace("-", "_")
        c.expect(")")
        return e

    return c.braced(entry)


def section(c: Cursor, m: Module, key: str) -> None:
    """The items of one stack-frame section (``key`` is its field of ``stack_frame_index``)."""
    items: list[Any] = []
    while True:
        c.skip_ws()
        mm = _SECTION_ITEM.match(c.text, c.pos)
        if not mm:
            break
        c.integer()
        if c.peek('"'):
            items.append(c.string())
        else:
            c.expect("{")
            d: dict[str, int] = {}
            while not c.eat("}"):
                k = c.name("a field name")
                c.expect("=")
                d[k] = c.integer()
            if key == "stack_frames":  # text writes parent_frame_id + 1
                d["parent_frame_id"] = d.get("parent_frame_id", 1) - 1
            items.append({k: v for k, v in d.items() if v})
    m.attributes.setdefault("stack_frame_index", {})[key] = items
