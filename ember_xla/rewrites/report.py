"""The rewrite report: each cluster (kind, shapes, location, tables, attributes) and each
near-miss with its reason, as plain data for ``report.json``."""

from __future__ import annotations

from typing import Any

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster, NearMiss


def location(op: Operation) -> dict[str, Any]:
    md = op.attributes.get("metadata", {}) or {}
    loc: dict[str, Any] = {"computation": op.parent.name if op.parent else None,
                           "instruction": op.name}
    for key in ("op_name", "source_file", "source_line"):
        if key in md:
            loc[key] = md[key]
    return loc


def describe_value(v: Value) -> dict[str, Any]:
    op = v.owner
    d: dict[str, Any] = {"instruction": op.name, "shape": str(v.type)}
    if op.opcode == "parameter":
        d["parameter_number"] = op.attributes.get("parameter_number", 0)
    return d


def cluster_entry(c: Cluster, custom_call: Operation | None) -> dict[str, Any]:
    table = c.table
    return {
        "kind": c.kind,
        "pass": c.direction,
        "pattern": c.pattern,
        "location": location(c.root),
        "custom_call": custom_call.name if custom_call is not None else None,
        "outlined_computation": custom_call.callees[0].name if custom_call is not None else None,
        "table": {**describe_value(table), "rows": table.type.dims[0],
                  "dim": table.type.dims[1], "dtype": table.type.element_type},
        "inputs": {role: describe_value(v) for role, v in zip(c.input_roles, c.inputs,
                                                                strict=True)},
        "output": str(c.root.result.type),
        "attributes": dict(c.attrs),
        "replaced_instructions": len(c.owned),
        "notes": list(c.notes),
    }


def near_miss_entry(n: NearMiss) -> dict[str, Any]:
    entry = {"pattern": n.pattern, "location": location(n.root), "opcode": n.root.opcode,
             "reason": n.reason}
    if n.direction is not None:
        entry["pass"] = n.direction
    return entry
