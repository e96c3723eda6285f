"""Print an HLO ``ir.Module`` in XLA's HLO text syntax (the form ``--xla_dump_to`` writes)."""

from __future__ import annotations

from typing import Any

from ember_xla.hlo.attr_print import print_attrs
from ember_xla.hlo.attr_text import quote
from ember_xla.hlo.literal import literal_text, literal_to_numpy
from ember_xla.hlo.shape import shape_from_dict
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.util.nogc import gc_paused

# Header fields of the module that have no text form (ids, profiles) or that we recompute.
_MODULE_TEXTLESS = {"id", "profile_info", "device_assignment", "schedule", "is_dynamic"}


def callee_attrs(op: Operation) -> list[str]:
    """The ``to_apply=``/``calls=``/... spellings of ``op``'s called computations."""
    names = [g.name for g in op.callees]
    if not names:
        return []
    code = op.opcode
    if code == "while":
        return [f"condition={names[1]}", f"body={names[0]}"]
    if code == "conditional":
        if op.operands and op.operands[0].type.element_type == "pred" and len(names) == 2:
            return [f"true_computation={names[0]}", f"false_computation={names[1]}"]
        return ["branch_computations={" + ", ".join(names) + "}"]
    if code == "select-and-scatter":
        return [f"select={names[0]}", f"scatter={names[1]}"]
    if code in ("fusion", "async-start", "async-update", "async-done"):
        return [f"calls={names[0]}"]
    if code == "custom-call":
        return ["called_computations={" + ", ".join(names) + "}"]
    return [f"to_apply={names[0]}"]


def instruction_text(op: Operation, is_root: bool = False) -> str:
    shape = op.result.type
    if op.opcode == "parameter":
        inner = str(op.attributes.get("parameter_number", 0))
    elif op.opcode == "constant":
        lit = op.attributes.get("literal", {})
        lshape = shape_from_dict(lit["shape"]) if "shape" in lit else shape
        inner = literal_text(literal_to_numpy(lit), lshape)
    else:
        inner = ", ".join(v.owner.name for v in op.operands)
    parts = [f"{'ROOT ' if is_root else ''}{op.name} = {shape.to_text()} {op.opcode}({inner})"]
    try:
        attrs = print_attrs(op.opcode, op.attributes)
    except ValueError as e:
        raise ValueError(f"instruction {op.name}: {e}") from None
    attrs[0:0] = callee_attrs(op)
    preds = op.attributes.get("control_predecessors")
    if preds:
        attrs.append("control-predecessors={" + ", ".join(preds) + "}")
    return ", ".join(parts + attrs)


def computation_text(g: Graph, entry: bool) -> str:
    head = ("ENTRY " if entry else "") + g.name
    thread = g.attributes.get("execution_thread")
    if thread and thread != "main":
        head += f", execution_thread={quote(thread)}"
    lines = [head + " {"]
    for op in g.topological():
        lines.append("  " + instruction_text(op, op is g.root))
    lines.append("}")
    return "\n".join(lines)


def _shape_index(xs: list[int]) -> str:
    return "{" + ",".join(str(x) for x in xs) + "}"


def _stack_sections(idx: dict[str, Any]) -> list[str]:
    """XLA's text sections for the stack-frame index. XLA's text requires every field and
    writes a frame's parent as ``parent_frame_id + 1``."""
    out: list[str] = []

    def loc(d: dict[str, Any]) -> str:
        keys = ("file_name_id", "function_name_id", "line", "end_line", "column", "end_column")
        return "{" + " ".join(f"{k}={d.get(k, 0)}" for k in keys) + "}"

    def frame(d: dict[str, Any]) -> str:
        return (f"{{file_location_id={d.get('file_location_id', 0)} "
                f"parent_frame_id={d.get('parent_frame_id', 0) + 1}}}")

    for title, key, fmt in (
        ("FileNames", "file_names", quote),
        ("FunctionNames", "function_names", quote),
        ("FileLocations", "file_locations", loc),
        ("StackFrames", "stack_frames", frame),
    ):
        items = idx.get(key, [])
        if items:
            out.append(title)
            out.extend(f"{i} {fmt(x)}" for i, x in enumerate(items, 1))
            out.append("")
    return out


def module_header(m: Module) -> str:
    entry = m.entry
    params = sorted(entry.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    layout = "(" + ", ".join(p.result.type.to_text() for p in params) + ")->"
    layout += entry.root.result.type.to_text()
    head = [f"HloModule {m.name}", "entry_computation_layout={" + layout + "}"]
    a = m.attributes
    alias = a.get("input_output_alias", {}).get("entries", [])
    if alias:
        items = []
        for e in alias:
            kind = str(e.get("kind", "MAY_ALIAS")).lower().replace("_", "-")
            items.append(f"{_shape_index(e.get('output_shape_index', []))}: "
                         f"({e.get('parameter_number', 0)}, "
                         f"{_shape_index(e.get('parameter_shape_index', []))}, {kind})")
        head.append("input_output_alias={ " + ", ".join(items) + " }")
    donors = a.get("buffer_donor", {}).get("entries", [])
    if donors:
        items = [f"({e.get('parameter_number', 0)}, "
                 f"{_shape_index(e.get('parameter_shape_index', []))})" for e in donors]
        head.append("buffer_donor={ " + ", ".join(items) + " }")
    fa = a.get("frontend_attributes", {}).get("map", {})
    if fa:
        head.append("frontend_attributes={" + ",".join(
            f"{k}={quote(v)}" for k, v in sorted(fa.items())) + "}")
    return ", ".join(head)


def print_module(m: Module) -> str:
    """The whole module as HLO text."""
    if m.entry is None:
        raise ValueError(f"module {m.name} has no entry computation")
    with gc_paused():
        return _print_module(m)


def _print_module(m: Module) -> str:
    parts = [module_header(m), ""]
    parts.extend(_stack_sections(m.attributes.get("stack_frame_index", {})))
    for g in m.post_order():
        parts.append(computation_text(g, g is m.entry))
        parts.append("")
    return "\n".join(parts)
