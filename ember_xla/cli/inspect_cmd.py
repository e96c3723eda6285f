"""``ember-xla inspect MODEL``: what a module holds (signature, computations, opcodes,
gathers and scatters)."""

from __future__ import annotations

import collections
from typing import Any

from ember_xla.hlo_import.model import Model
from ember_xla.ir.graph import Module
from ember_xla.util import strict_json


def summary(model: Model) -> dict[str, Any]:
    m: Module = model.module
    entry = m.entry
    params = sorted(entry.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    opcodes = collections.Counter(op.opcode for op in m.walk())
    callers: dict[str, list[str]] = collections.defaultdict(list)
    for op in m.walk():
        for c in op.callees:
            callers[c.name].append(f"{op.parent.name}/{op.name}")
    lookups = []
    for op in m.walk():
        if op.opcode in ("gather", "scatter"):
            lookups.append({
                "opcode": op.opcode, "instruction": op.name, "computation": op.parent.name,
                "operands": [str(v.type) for v in op.operands], "result": str(op.result.type),
            })
    return {
        "source": model.source,
        "module": m.name,
        "entry": entry.name,
        "parameters": [_parameter(model, p) for p in params],
        "result": str(entry.root.result.type),
        "instructions": sum(opcodes.values()),
        "opcodes": dict(sorted(opcodes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "computations": [{"name": g.name, "instructions": len(g.ops),
                          "called_by": callers.get(g.name, [])} for g in m.graphs],
        "gathers_scatters": lookups,
        **({"elided_constants": list(model.elided_constants)} if model.elided_constants
           else {}),
    }


def _parameter(model: Model, p: Any) -> dict[str, Any]:
    num = p.attributes.get("parameter_number", 0)
    out = {"number": num, "name": p.name, "shape": str(p.result.type),
           "bound": num in model.bound}
    if num in model.source_names:
        out["source_name"] = model.source_names[num]
    return out


def render(s: dict[str, Any]) -> str:
    lines = [f"{s['source']}: module {s['module']}, entry {s['entry']}, "
             f"{s['instructions']} instructions in {len(s['computations'])} computations"]
    lines.append("entry signature:")
    for p in s["parameters"]:
        src = p.get("source_name")
        tag = (f"  (bound: variable {src})" if p["bound"] and src
               else "  (bound: captured variable)" if p["bound"]
               else f"  (input {src})" if src and src != p["name"] else "")
        lines.append(f"  param {p['number']}: {p['name']} {p['shape']}{tag}")
    lines.append(f"  result: {s['result']}")
    lines.append("opcodes: " + ", ".join(f"{k} {v}" for k, v in s["opcodes"].items()))
    lines.append("computations:")
    for c in s["computations"]:
        by = ", ".join(c["called_by"][:3]) + (" ..." if len(c["called_by"]) > 3 else "")
        lines.append(f"  {c['name']}: {c['instructions']} instructions"
                     + (f", called by {by}" if by else " (entry)" if c['name'] == s['entry']
                        else ""))
    if s.get("elided_constants"):
        lines.append(f"elided constants (printed as {{...}}, values not in the text): "
                     f"{len(s['elided_constants'])}")
        lines += [f"  {e}" for e in s["elided_constants"]]
    lines.append(f"gathers/scatters: {len(s['gathers_scatters'])}")
    for g in s["gathers_scatters"]:
        lines.append(f"  {g['opcode']} {g['computation']}/{g['instruction']}: "
                     f"{', '.join(g['operands'])} -> {g['result']}")
    return "\n".join(lines)


def inspect(models: list[Model], as_json: bool) -> str:
    sums = []
    for m in models:
        try:
            sums.append(summary(m))
        except ValueError as e:  # e.g. a shape whose layout the text form cannot spell
            raise ValueError(f"{m.source}: {e}") from None
    if as_json:
        return strict_json.dumps(sums if len(sums) > 1 else sums[0], indent=2)
    return "\n\n".join(render(s) for s in sums)
