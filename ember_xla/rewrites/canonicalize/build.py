"""Small HLO builders the canonicalization passes share: constants, broadcasts, reshapes,
slices, compares and the per-lookup value of a tensor that is constant along its row dim."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.hlo.literal import literal_from_numpy, literal_to_numpy
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value

ELEMENTWISE = frozenset({"compare", "and", "or", "not", "xor", "convert", "select", "add",
                         "subtract", "multiply", "divide", "maximum", "minimum", "negate",
                         "abs", "clamp"})


class Emit:
    """Creates ops before ``anchor`` through a PatternRewriter (so changes are recorded)."""

    def __init__(self, rw: PatternRewriter, anchor: Operation) -> None:
        self.rw, self.anchor = rw, anchor

    def op(self, opcode: str, operands: list[Value], shape: Shape,
           attrs: dict[str, Any] | None = None, callees: list | None = None,
           name: str = "") -> Value:
        new = Operation(opcode, operands, [shape], attrs or {}, callees,
                        name or f"canon.{opcode}")
        return self.rw.insert_before(self.anchor, new).result

    def constant(self, value: Any, element_type: str) -> Value:
        s = Shape.array(element_type, ())
        return self.op("constant", [], s, {"literal": literal_from_numpy(np.asarray(value), s)})

    def broadcast(self, v: Value, dims: tuple[int, ...], mapping: list[int]) -> Value:
        return self.op("broadcast", [v], Shape.array(v.type.element_type, dims),
                       {"dimensions": list(mapping)})

    def splat(self, value: Any, element_type: str, dims: tuple[int, ...]) -> Value:
        return self.broadcast(self.constant(value, element_type), dims, [])

    def reshape(self, v: Value, dims: tuple[int, ...]) -> Value:
        if tuple(v.type.dims) == tuple(dims):
            return v
        return self.op("reshape", [v], Shape.array(v.type.element_type, dims))

    def compare(self, a: Value, b: Value, direction: str) -> Value:
        et = a.type.element_type
        kind = "FLOAT" if et.startswith(("f", "bf")) else (
            "UNSIGNED" if et.startswith("u") or et == "pred" else "SIGNED")
        return self.op("compare", [a, b], Shape.array("pred", a.type.dims),
                       {"comparison_direction": direction, "comparison_type": kind})

    def first_along_last(self, v: Value) -> Value:
        """``v[..., 0]`` as a value of ``v``'s leading dims (slice + reshape)."""
        dims = v.type.dims
        sl = [{"start": 0, "limit": d, "stride": 1} for d in dims[:-1]]
        sl.append({"start": 0, "limit": 1, "stride": 1})
        s = self.op("slice", [v], Shape.array(v.type.element_type, dims[:-1] + (1,)),
                    {"slice_dimensions": sl})
        return self.reshape(s, dims[:-1])


def constant_array(v: Value) -> np.ndarray | None:
    op = v.owner
    if op is None or op.opcode != "constant":
        return None
    try:
        return np.asarray(literal_to_numpy(op.attributes.get("literal", {})))
    except ValueError:
        return None


def constant_along_last(v: Value, depth: int = 12) -> bool:
    """Is ``v`` provably the same for every index of its last dim (e.g. a [B,P] mask
    broadcast along the row dim D)?"""
    t = v.type
    if t.rank == 0 or t.dims[-1] == 1:
        return True
    if depth == 0 or v.owner is None:
        return False
    op = v.owner
    last = t.rank - 1
    if op.opcode == "broadcast":
        dims = op.attributes.get("dimensions", [])
        if last not in dims:
            return True
        src = op.operands[0]
        k = dims.index(last)
        if src.type.dims[k] == 1:
            return True
        return k == src.type.rank - 1 and constant_along_last(src, depth - 1)
    if op.opcode == "constant":
        arr = constant_array(v)
        return arr is not None and arr.ndim == t.rank and bool(
            np.all(arr == arr[..., :1]) or np.all(np.isnan(arr.astype(float))))
    if op.opcode == "iota":
        return op.attributes.get("dimensions", [0])[0] != last
    if op.opcode in ("reshape", "bitcast", "copy"):
        src = op.operands[0]
        return (src.type.rank >= 1 and src.type.dims[-1] == t.dims[-1]
                and constant_along_last(src, depth - 1))
    if op.opcode in ELEMENTWISE:
        return all(o.type.rank == 0 or (o.type.dims == t.dims and constant_along_last(
            o, depth - 1)) for o in op.operands)
    return False


def iota_along_last(v: Value, depth: int = 12) -> bool:
    """Is ``v[..., j] == j`` for every index (an iota over the last dim, broadcast to the
    leading dims)?"""
    t = v.type
    op = v.owner
    if t.rank == 0 or depth == 0 or op is None:
        return False
    last = t.rank - 1
    if op.opcode == "iota":
        return op.attributes.get("dimensions", [0])[0] == last
    if op.opcode == "broadcast":
        dims = op.attributes.get("dimensions", [])
        src = op.operands[0]
        return (bool(dims) and dims[-1] == last and src.type.dims[-1] == t.dims[last]
                and iota_along_last(src, depth - 1))
    if op.opcode in ("reshape", "bitcast", "copy", "convert"):
        src = op.operands[0]
        return (src.type.rank >= 1 and src.type.dims[-1] == t.dims[-1]
                and iota_along_last(src, depth - 1))
    return False
