"""The HLO verifier: structure (names, ids, operands, called computations, parameters), what
XLA's verifier rejects before any shape inference (operand and callee counts per opcode,
parameter numbers against callers, dims in [0, 2^63), tuple nesting depth) and the shape rules
that can be checked locally (elementwise, tuples, reshape, broadcast, calls)."""

from __future__ import annotations

from ember_xla.hlo.counts import check_counts, check_shape
from ember_xla.hlo.ffi_config import check_backend_config
from ember_xla.hlo.opcodes import ARITY, ELEMENTWISE, OPCODES
from ember_xla.hlo.shape import Shape
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation

_TYPE_CHANGING = {"abs", "convert", "compare", "is-finite", "real", "imag", "complex", "select",
                  "reduce-precision", "stochastic-convert"}


def _same_dims(a: Shape, b: Shape) -> bool:
    return a.dims == b.dims and a.is_tuple == b.is_tuple


class HloVerifyError(VerifyError):
    """A broken rule, with the computation and (if any) instruction it was found at."""

    def __init__(self, message: str, graph: str, op: str | None) -> None:
        super().__init__(message)
        self.graph = graph
        self.op = op
        self.bare = message.split(": ", 1)[-1]


def _fail(g: Graph, op: Operation | None, msg: str) -> VerifyError:
    where = f"computation {g.name}" + (f", instruction {op.name}" if op is not None else "")
    return HloVerifyError(f"{where}: {msg}", g.name, op.name if op is not None else None)


def strip_layout(s: Shape) -> Shape:
    if s.is_tuple:
        return Shape.tuple_of(tuple(strip_layout(t) for t in s.tuple_shapes))
    return Shape(s.element_type, s.dims)


def verify_op(g: Graph, op: Operation, graphs: set[int]) -> None:
    if op.opcode not in OPCODES:
        raise _fail(g, op, f"unknown opcode {op.opcode!r}")
    want = ARITY.get(op.opcode)
    if want is not None and len(op.operands) != want:
        raise _fail(g, op, f"{op.opcode} takes {want} operands, has {len(op.operands)}")
    problem = check_shape(op.result.type)
    if problem:
        raise _fail(g, op, problem)
    problem = check_counts(op) or check_backend_config(op)
    if problem:
        raise _fail(g, op, problem)
    for v in op.operands:
        if v.owner is None or v.owner.parent is not g:
            raise _fail(g, op, "reads a value from outside its computation")
    for c in op.callees:
        if id(c) not in graphs:
            raise _fail(g, op, f"calls computation {c.name}, which is not in the module")
    shape: Shape = op.result.type
    if op.opcode in ELEMENTWISE and shape.is_array:
        for v in op.operands:
            s = v.type
            if op.opcode in ("select", "clamp") and s.rank == 0:
                continue
            if not _same_dims(s, shape):
                raise _fail(g, op, f"operand {v.owner.name} has shape {s}, expected the dims "
                                   f"of the result {shape}")
            if op.opcode not in _TYPE_CHANGING and s.element_type != shape.element_type:
                raise _fail(g, op, f"operand {v.owner.name} is {s.element_type}, result is "
                                   f"{shape.element_type}")
    if op.opcode == "compare" and shape.element_type != "pred":
        raise _fail(g, op, "compare must produce pred")
    if op.opcode == "get-tuple-element":
        src = op.operands[0].type
        idx = op.attributes.get("tuple_index", 0)
        if not src.is_tuple or not 0 <= idx < len(src.tuple_shapes):
            raise _fail(g, op, f"index {idx} is out of range for {src}")
        if strip_layout(src.tuple_shapes[idx]) != strip_layout(shape):
            raise _fail(g, op, f"shape {shape} differs from tuple element {src.tuple_shapes[idx]}")
    if op.opcode in ("reshape", "bitcast") and shape.is_array:
        if op.operands[0].type.size != shape.size and op.opcode == "reshape":
            raise _fail(g, op, f"reshape of {op.operands[0].type} to {shape} changes size")
    if op.opcode == "broadcast":
        dims = op.attributes.get("dimensions", [])
        src = op.operands[0].type
        if len(dims) != src.rank or any(not 0 <= d < shape.rank for d in dims):
            raise _fail(g, op, f"dimensions {dims} do not map {src} into {shape}")
    if op.opcode == "call" and op.callees:
        callee = op.callees[0]
        if len(callee.params()) != len(op.operands):
            raise _fail(g, op, f"calls {callee.name} with {len(op.operands)} operands, it takes "
                               f"{len(callee.params())}")
        if strip_layout(callee.root.result.type) != strip_layout(shape):
            raise _fail(g, op, f"result {shape} differs from {callee.name}'s result "
                               f"{callee.root.result.type}")


def verify_graph(g: Graph, graphs: set[int]) -> None:
    if g.root is None or g.root.parent is not g:
        raise _fail(g, None, "has no root instruction inside it")
    names: set[str] = set()
    for op in g.ops:
        if op.name in names:
            raise _fail(g, op, "duplicate instruction name")
        names.add(op.name)
        verify_op(g, op, graphs)
    params = g.params()
    numbers = sorted(p.attributes.get("parameter_number", 0) for p in params)
    if numbers != list(range(len(numbers))):
        seen: set[int] = set()
        for p in params:  # name the first parameter out of range or repeated
            num = p.attributes.get("parameter_number", 0)
            if not 0 <= num < len(params) or num in seen:
                raise _fail(g, p, f"parameter number {num} is not unique in 0..{len(params) - 1}"
                                  f" (the computation has {len(params)} parameters)")
            seen.add(num)
    order = g.topological()
    if len(order) != len(g.ops):
        raise _fail(g, None, "has a cycle")


def verify_module(m: Module) -> None:
    """Raise ``VerifyError`` naming the computation and instruction that breaks a rule."""
    if m.entry is None or m.entry not in m.graphs:
        raise VerifyError(f"module {m.name}: no entry computation")
    graphs = {id(g) for g in m.graphs}
    gnames: set[str] = set()
    ids: dict[int, str] = {}
    for g in m.graphs:
        if g.name in gnames:
            raise VerifyError(f"module {m.name}: duplicate computation name {g.name}")
        gnames.add(g.name)
        verify_graph(g, graphs)
        for op in g.ops:
            if op.id is not None:
                if op.id in ids:
                    raise _fail(g, op, f"id {op.id} is also used by {ids[op.id]}")
                ids[op.id] = f"{g.name}/{op.name}"
