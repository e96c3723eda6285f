"""HloModuleProto bytes <-> ``ir.Module`` (HLO dialect), with TensorFlow's generated schema.

Every instruction field except the structural ones (name, opcode, shape, ids) is kept, in
proto-dict form, in ``op.attributes``; computation and module fields likewise. Ids are kept so a
round trip writes the same module; program shapes are recomputed on export. The module's
``schedule`` is dropped on import (rewrites invalidate it; XLA reschedules when compiling).
"""

from __future__ import annotations

from typing import Any

from ember_xla.hlo_import import protodict
from ember_xla.hlo_import.errors import ImportError_
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.hlo.opcodes import OPCODES
from ember_xla.ir.hlo.shape import Shape, shape_from_dict, shape_to_dict
from ember_xla.ir.operation import Operation
from ember_xla.util.nogc import gc_paused

_INSTR_STRUCT = {
    "name", "opcode", "shape", "id", "operand_ids", "control_predecessor_ids",
    "called_computation_ids",
}
_COMP_STRUCT = {"name", "instructions", "id", "root_id", "program_shape"}
_MODULE_STRUCT = {
    "name", "entry_computation_name", "entry_computation_id", "computations",
    "host_program_shape", "schedule",
}


def _hlo_pb2() -> Any:
    from tensorflow.compiler.xla.service import hlo_pb2  # lazy: imports all of TensorFlow

    return hlo_pb2


def module_from_proto(data: bytes, path: str | None = None) -> Module:
    """Parse serialized HloModuleProto bytes. Raises ``ImportError_`` on bad input."""
    hlo_pb2 = _hlo_pb2()
    msg = hlo_pb2.HloModuleProto()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # DecodeError and friends
        raise ImportError_(
            f"not a valid HloModuleProto ({type(e).__name__}: {e}); expected the bytes of a "
            "serialized xla.HloModuleProto", path) from None
    with gc_paused():
        return module_from_dict(protodict.to_dict(msg), path)


def module_from_dict(d: dict[str, Any], path: str | None = None) -> Module:
    if not d.get("computations"):
        raise ImportError_("HloModuleProto has no computations (is this an HLO module?)", path)
    module = Module(d.get("name", "module"))
    module.attributes = {k: v for k, v in d.items() if k not in _MODULE_STRUCT}
    by_id: dict[int, Graph] = {}
    pending: list[tuple[Operation, list[int], str]] = []
    for cd in d["computations"]:
        g = Graph(cd.get("name", ""))
        g.id = cd.get("id", 0)
        g.attributes = {k: v for k, v in cd.items() if k not in _COMP_STRUCT}
        if g.id in by_id:
            raise ImportError_(f"duplicate computation id {g.id} ({g.name})", path)
        by_id[g.id] = g
        module.graphs.append(g)
        ops: dict[int, Operation] = {}
        for ins in cd.get("instructions", []):
            opcode = ins.get("opcode", "")
            name = ins.get("name", "")
            if opcode not in OPCODES:
                raise ImportError_(
                    f"computation {g.name}, instruction {name}: unknown opcode {opcode!r}", path)
            try:
                shape = shape_from_dict(ins.get("shape", {}))
            except ValueError as e:
                raise ImportError_(f"computation {g.name}, instruction {name}: {e}", path) from None
            operands = []
            for oid in ins.get("operand_ids", []):  # ids may be 0 (proto3 default)
                if oid not in ops:
                    raise ImportError_(
                        f"computation {g.name}, instruction {name}: operand id {oid} is not "
                        "defined before it", path)
                operands.append(ops[oid].result)
            attrs = {k: v for k, v in ins.items() if k not in _INSTR_STRUCT}
            preds = ins.get("control_predecessor_ids", [])
            if preds:
                attrs["control_predecessors"] = [ops[p].name for p in preds if p in ops]
            op = Operation(opcode, operands, [shape], attrs, [], name)
            g.insert(len(g.ops), op)
            if op.name != name:
                raise ImportError_(f"computation {g.name}: duplicate instruction name {name}", path)
            op.id = ins.get("id", 0)
            if op.id in ops:
                raise ImportError_(f"computation {g.name}: duplicate instruction id {op.id}", path)
            ops[op.id] = op
            pending.append((op, list(ins.get("called_computation_ids", [])), g.name))
        root_id = cd.get("root_id", 0)
        if root_id not in ops:
            if not ops:
                raise ImportError_(f"computation {g.name} has no instructions", path)
            raise ImportError_(f"computation {g.name}: root id {root_id} is not defined", path)
        g.root = ops[root_id]
    for op, ids, gname in pending:
        for cid in ids:
            if cid not in by_id:
                raise ImportError_(
                    f"computation {gname}, instruction {op.name}: calls unknown computation "
                    f"id {cid}", path)
            op.callees.append(by_id[cid])
    entry_id = d.get("entry_computation_id", 0)
    entry_name = d.get("entry_computation_name")
    entry = by_id.get(entry_id) if entry_id is not None else None
    if entry is None and entry_name:
        entry = next((g for g in module.graphs if g.name == entry_name), None)
    if entry is None:
        entry = module.graphs[-1]
    module.entry = entry
    return module


def program_shape(g: Graph) -> dict[str, Any]:
    params = sorted(g.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    return {
        "parameters": [shape_to_dict(p.result.type) for p in params],
        "result": shape_to_dict(g.root.result.type),
        "parameter_names": [p.name for p in params],
    }


def assign_ids(module: Module) -> None:
    """Give graphs and ops without an id fresh ones, keeping existing ids.

    XLA reads the low 32 bits of an instruction id as its id inside the computation, so a
    computation that gained new ops is renumbered as a whole: ``(graph id << 32) | k``.
    """
    gids = {g.id for g in module.graphs if g.id is not None}
    gnext = max(gids, default=0) + 1
    for g in module.graphs:
        if g.id is None:
            g.id = gnext
            gnext += 1
    for g in module.graphs:
        if any(op.id is None for op in g.ops):
            if g.id == 0:  # keep (id << 32) | k clear of ids other graphs number from 1
                g.id = gnext
                gnext += 1
            for k, op in enumerate(g.topological(), 1):
                op.id = (g.id << 32) | k


def module_to_dict(module: Module) -> dict[str, Any]:
    module.uniquify_op_names()
    assign_ids(module)
    comps = []
    for g in module.post_order():
        names = {op.name: op for op in g.ops}
        instrs = []
        for op in g.topological():
            ins: dict[str, Any] = {"name": op.name, "opcode": op.opcode}
            ins["shape"] = shape_to_dict(op.result.type)
            attrs = dict(op.attributes)
            preds = attrs.pop("control_predecessors", [])
            ins.update(attrs)
            ins["id"] = op.id
            if op.operands:
                ins["operand_ids"] = [v.owner.id for v in op.operands]
            if preds:
                ins["control_predecessor_ids"] = [names[p].id for p in preds]
            if op.callees:
                ins["called_computation_ids"] = [c.id for c in op.callees]
            instrs.append(ins)
        cd: dict[str, Any] = {"name": g.name, "instructions": instrs}
        cd["program_shape"] = program_shape(g)
        cd["id"] = g.id
        cd["root_id"] = g.root.id
        cd.update(g.attributes)
        comps.append(cd)
    entry = module.entry
    d: dict[str, Any] = {
        "name": module.name,
        "entry_computation_name": entry.name,
        "computations": comps,
    }
    hps = program_shape(entry)
    hps["parameter_names"] = [f"p{i}" for i in range(len(hps["parameters"]))]
    d["host_program_shape"] = hps
    d["entry_computation_id"] = entry.id
    d.update(module.attributes)
    return d


def module_to_proto(module: Module) -> bytes:
    """Serialize to HloModuleProto bytes."""
    hlo_pb2 = _hlo_pb2()
    with gc_paused():
        msg = protodict.to_message(module_to_dict(module), hlo_pb2.HloModuleProto())
    return msg.SerializeToString(deterministic=True)


__all__ = ["module_from_proto", "module_to_proto", "module_from_dict", "module_to_dict", "Shape"]
