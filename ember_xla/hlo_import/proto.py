"""HloModuleProto bytes <-> ``ir.Module`` (HLO dialect), with TensorFlow's generated schema.

Every instruction field except the structural ones (name, opcode, shape, ids) is kept, in
proto-dict form, in ``op.attributes``; computation and module fields likewise. Ids are kept so a
round trip writes the same module; program shapes are recomputed on export. The module's
``schedule`` is dropped on import (rewrites invalidate it; XLA reschedules when compiling).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo.extensions import encode_extensions
from ember_xla.hlo.opcodes import OPCODES
from ember_xla.hlo.shape import Shape, shape_from_dict, shape_to_dict
from ember_xla.hlo_import import protodict
from ember_xla.ir.graph import Graph, Module
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


_HLO_PB2 = "tensorflow.compiler.xla.service.hlo_pb2"


@functools.cache
def _hlo_pb2() -> Any:
    """TensorFlow's generated ``hlo_pb2``, without importing TensorFlow (3-7 s): the module and
    the two it imports only need protobuf, so they are loaded under a temporary stand-in for the
    ``tensorflow`` package, which is removed again (a later real ``import tensorflow`` loads its
    own copies; protobuf hands both the same message classes)."""
    if "tensorflow" in sys.modules:
        return importlib.import_module(_HLO_PB2)
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return importlib.import_module(_HLO_PB2)  # raises the usual ModuleNotFoundError
    before = set(sys.modules)
    stand_in = types.ModuleType("tensorflow")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["tensorflow"] = stand_in
    try:
        return importlib.import_module(_HLO_PB2)
    finally:
        for name in [n for n in sys.modules if n not in before
                     and (n == "tensorflow" or n.startswith("tensorflow."))]:
            del sys.modules[name]


def module_from_proto(data: bytes, path: str | None = None) -> Module:
    """Parse serialized HloModuleProto bytes. Raises ``HloImportError`` on bad input."""
    hlo_pb2 = _hlo_pb2()
    msg = hlo_pb2.HloModuleProto()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # DecodeError and friends
        raise HloImportError(
            f"not a valid HloModuleProto ({type(e).__name__}: {e}); expected the bytes of a "
            "serialized xla.HloModuleProto", path) from None
    with gc_paused():
        special = {hlo_pb2.HloInstructionProto.DESCRIPTOR.fields_by_name["shape"]:
                   _shape_converter()}
        return module_from_dict(protodict.to_dict(msg, special), path)


def _shape_converter() -> Callable[[Any], Any]:
    """ShapeProto -> ``Shape`` (what ``shape_from_dict(to_dict(msg))`` gives), cached on the
    serialized bytes: a module repeats a few shapes many times. A shape ``shape_from_dict``
    rejects stays a dict, so ``module_from_dict`` reports it with its instruction."""
    cache: dict[bytes, Shape] = {}

    def convert(msg: Any) -> Any:
        key = msg.SerializeToString()
        s = cache.get(key)
        if s is None:
            d = protodict.to_dict(msg)
            try:
                s = cache[key] = shape_from_dict(d)
            except ValueError:
                return d
        return s

    return convert


def module_from_dict(d: dict[str, Any], path: str | None = None) -> Module:
    if not d.get("computations"):
        raise HloImportError("HloModuleProto has no computations (is this an HLO module?)", path)
    module = Module(d.get("name", "module"))
    module.attributes = {k: v for k, v in d.items() if k not in _MODULE_STRUCT}
    by_id: dict[int, Graph] = {}
    pending: list[tuple[Operation, list[int], str]] = []
    for cd in d["computations"]:
        g = Graph(cd.get("name", ""))
        g.id = cd.get("id", 0)
        g.attributes = {k: v for k, v in cd.items() if k not in _COMP_STRUCT}
        if g.id in by_id:
            raise HloImportError(f"duplicate computation id {g.id} ({g.name})", path)
        by_id[g.id] = g
        module.graphs.append(g)
        ops: dict[int, Operation] = {}
        for ins in cd.get("instructions", []):
            opcode = ins.get("opcode", "")
            name = ins.get("name", "")
            if opcode not in OPCODES:
                raise HloImportError(
                    f"computation {g.name}, instruction {name}: unknown opcode {opcode!r}", path)
            try:
                shape = ins.get("shape", {})
                if not isinstance(shape, Shape):  # module_from_proto converts shapes itself
                    shape = shape_from_dict(shape)
            except ValueError as e:
                raise HloImportError(f"computation {g.name}, instruction {name}: {e}",
                                     path) from None
            operands = []
            for oid in ins.get("operand_ids", []):  # ids may be 0 (proto3 default)
                if oid not in ops:
                    raise HloImportError(
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
                raise HloImportError(f"computation {g.name}: duplicate instruction name {name}",
                                     path)
            op.id = ins.get("id", 0)
            if op.id in ops:
                raise HloImportError(f"computation {g.name}: duplicate instruction id {op.id}",
                                     path)
            ops[op.id] = op
            pending.append((op, list(ins.get("called_computation_ids", [])), g.name))
        root_id = cd.get("root_id", 0)
        if root_id not in ops:
            if not ops:
                raise HloImportError(f"computation {g.name} has no instructions", path)
            raise HloImportError(f"computation {g.name}: root id {root_id} is not defined", path)
        g.root = ops[root_id]
    for op, ids, gname in pending:
        for cid in ids:
            if cid not in by_id:
                raise HloImportError(
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


def _instruction_dict(op: Operation, names: dict[str, Operation]) -> dict[str, Any]:
    ins: dict[str, Any] = {"name": op.name, "opcode": op.opcode}
    ins["shape"] = shape_to_dict(op.result.type)
    attrs = dict(encode_extensions(op.attributes))
    preds = attrs.pop("control_predecessors", [])
    ins.update(attrs)
    ins["id"] = op.id
    if op.operands:
        ins["operand_ids"] = [v.owner.id for v in op.operands]
    if preds:
        ins["control_predecessor_ids"] = [names[p].id for p in preds]
    if op.callees:
        ins["called_computation_ids"] = [c.id for c in op.callees]
    return ins


def _module_dict(module: Module, instructions: Callable[[Graph], list[Any]]) -> dict[str, Any]:
    """``module_to_dict`` with each computation's instruction list made by ``instructions``."""
    module.uniquify_op_names()
    assign_ids(module)
    comps = []
    for g in module.post_order():
        cd: dict[str, Any] = {"name": g.name, "instructions": instructions(g)}
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


def module_to_dict(module: Module) -> dict[str, Any]:
    def instructions(g: Graph) -> list[Any]:
        names = {op.name: op for op in g.ops}
        return [_instruction_dict(op, names) for op in g.topological()]

    return _module_dict(module, instructions)


class _Ops(list):
    """A computation's ops in order, standing in for its instruction dicts (see _module_message)."""

    graph: Graph


def _module_message(module: Module, hlo_pb2: Any) -> Any:
    """``to_message(module_to_dict(module), HloModuleProto())`` without the per-instruction
    dicts: instructions are written straight into their messages (shapes merged from cached
    serialized ShapeProtos); everything else goes through ``protodict.to_message`` in the same
    order as the dict form, so the message is the same."""
    to_message = protodict.to_message
    shape_bytes = _ShapeBytes(hlo_pb2)

    def instructions(g: Graph) -> list[Any]:
        ops = _Ops(g.topological())
        ops.graph = g
        return ops

    d = _module_dict(module, instructions)
    msg = hlo_pb2.HloModuleProto()
    for key, value in d.items():
        if key != "computations" or not isinstance(value, list):
            to_message({key: value}, msg)
            continue
        for cd in value:
            cmsg = msg.computations.add()
            if not isinstance(cd, dict):
                to_message(cd, cmsg)  # raises as the dict form would
                continue
            for ckey, cvalue in cd.items():
                if ckey != "instructions" or type(cvalue) is not _Ops:
                    to_message({ckey: cvalue}, cmsg)
                    continue
                names = {op.name: op for op in cvalue.graph.ops}
                add = cmsg.instructions.add
                for op in cvalue:
                    _instruction_message(op, names, add(), shape_bytes)
    return msg


def _instruction_message(op: Operation, names: dict[str, Operation], msg: Any,
                         shape_bytes: _ShapeBytes) -> None:
    attrs = encode_extensions(op.attributes)
    if not _INSTR_STRUCT.isdisjoint(attrs):  # attributes shadow structural fields
        protodict.to_message(_instruction_dict(op, names), msg)
        return
    msg.name = op.name
    msg.opcode = op.opcode
    shape = op.result.type
    data = shape_bytes(shape)
    if data:
        msg.shape.MergeFromString(data)
    else:
        msg.shape.SetInParent()
    preds = attrs.get("control_predecessors", [])
    if "control_predecessors" in attrs:
        attrs = dict(attrs)
        del attrs["control_predecessors"]
    protodict.to_message(attrs, msg)
    msg.id = op.id
    if op.operands:
        msg.operand_ids.extend([v.owner.id for v in op.operands])
    if preds:
        msg.control_predecessor_ids.extend([names[p].id for p in preds])
    if op.callees:
        msg.called_computation_ids.extend([c.id for c in op.callees])


class _ShapeBytes:
    """Shape -> serialized ShapeProto (of ``shape_to_dict``), cached by object and by value."""

    def __init__(self, hlo_pb2: Any) -> None:
        self.proto = type(hlo_pb2.HloInstructionProto().shape)  # xla.ShapeProto
        self.by_id: dict[int, tuple[Shape, bytes]] = {}
        self.by_value: dict[Shape, bytes] = {}

    def __call__(self, shape: Shape) -> bytes:
        hit = self.by_id.get(id(shape))
        if hit is not None and hit[0] is shape:
            return hit[1]
        try:
            data = self.by_value.get(shape)
        except TypeError:  # layout fields holding lists: not hashable
            return self._serialize(shape)
        if data is None:
            data = self.by_value[shape] = self._serialize(shape)
        self.by_id[id(shape)] = (shape, data)
        return data

    def _serialize(self, shape: Shape) -> bytes:
        msg = self.proto()
        return protodict.to_message(shape_to_dict(shape), msg).SerializeToString()


def module_to_proto(module: Module) -> bytes:
    """Serialize to HloModuleProto bytes."""
    hlo_pb2 = _hlo_pb2()
    with gc_paused():
        msg = _module_message(module, hlo_pb2)
    return msg.SerializeToString(deterministic=True)


__all__ = ["module_from_proto", "module_to_proto", "module_from_dict", "module_to_dict", "Shape"]
