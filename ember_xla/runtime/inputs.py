"""Random but valid inputs for a module's entry signature.

Integer parameters that end up as gather or scatter indices get values inside the bounds of the
dimension they index (so random runs exercise real lookups); so do float parameters converted
to integers on the way (a Keras ``Sequential`` whose ``Input`` is float casts its ids), as
whole numbers. Everything else is random data.
"""

from __future__ import annotations

import os

import numpy as np

from ember_xla.hlo.shape import FLOAT_TYPES, INT_TYPES, Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation

MAX_RUN_BYTES = 4 << 30  # inputs + outputs of one `run` / `--verify`

# Ops through which an index value passes unchanged (in value range).
_PASS = {"reshape", "bitcast", "convert", "copy", "broadcast", "slice", "concatenate",
         "transpose", "dynamic-slice", "get-tuple-element", "tuple", "clamp"}


def _callers(module: Module, opcodes: tuple[str, ...] = ("call", "fusion")
             ) -> dict[int, list[Operation]]:
    out: dict[int, list[Operation]] = {}
    for op in module.walk():
        if op.opcode in opcodes:
            for c in op.callees:
                out.setdefault(id(c), []).append(op)
    return out


def _element(op: Operation | None, path: list[int]) -> Operation | None:
    """The producer of the element at ``path`` of the (nested) ``tuple`` ``op``, or None."""
    for k in path:
        if op is None or op.opcode != "tuple" or k >= len(op.operands):
            return None
        op = op.operands[k].owner
    return op


def _loop_state(op: Operation, loops: dict[int, list[Operation]]) -> list[Operation]:
    """For a (nested) ``get-tuple-element`` of the state parameter of a while loop's body or
    condition (``lax.map``/``scan`` carry their operands there, TF's ``map_fn`` in tuples
    within it): the producers of that element of the loop's initial state and of the body's
    next state; [] for anything else."""
    path: list[int] = []
    p: Operation | None = op
    while p is not None and p.opcode == "get-tuple-element":
        path.insert(0, p.attributes.get("tuple_index", 0))
        p = p.operands[0].owner
    if not path or p is None or p.opcode != "parameter":
        return []
    out = []
    for w in loops.get(id(p.parent), []):
        body = w.callees[0] if w.callees else None
        for t in (w.operands[0].owner, body.root if body is not None else None):
            e = _element(t, path)
            if e is not None:
                out.append(e)
    return out


def _index_bounds(module: Module) -> dict[int, int]:
    """Entry parameter number -> exclusive upper bound for its values."""
    return _index_uses(module)[0]


def _index_uses(module: Module) -> tuple[dict[int, int], dict[int, set[str]]]:
    """Entry parameter number -> exclusive upper bound for its values, and -> how they are
    used: ``gather``/``scatter`` and the promises (``indices_are_sorted``,
    ``unique_indices``) of the ops they reach."""
    callers = _callers(module)
    loops = _callers(module, ("while",))
    bounds: dict[int, int] = {}
    promises: dict[int, set[str]] = {}
    current: set[str] = set()

    def visit(op: Operation, bound: int, seen: set[int]) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        g: Graph = op.parent
        if op.opcode == "parameter":
            num = op.attributes.get("parameter_number", 0)
            if g is module.entry:
                bounds[num] = min(bound, bounds.get(num, bound))
                promises.setdefault(num, set()).update(current)
            for call in callers.get(id(g), []):
                if num < len(call.operands):
                    visit(call.operands[num].owner, bound, seen)
            return
        state = _loop_state(op, loops)
        if state:
            for producer in state:
                visit(producer, bound, seen)
            return
        if op.opcode in _PASS or op.opcode in ("select", "add", "call"):
            for v in op.operands:
                if v.type.is_array and (v.type.element_type in INT_TYPES or (
                        op.opcode == "convert" and v.type.element_type in FLOAT_TYPES)):
                    visit(v.owner, bound, seen)

    for op in module.walk():
        current = {k for k in ("indices_are_sorted", "unique_indices")
                   if op.attributes.get(k) in (True, "true")} | {op.opcode}
        if op.opcode == "gather":
            dn = op.attributes.get("gather_dimension_numbers", {})
            dims = dn.get("start_index_map", [0])
            operand: Shape = op.operands[0].type
            dims = [d for d in dims if 0 <= d < operand.rank]  # XLA's verifier rejects others
            bound = min(operand.dims[d] for d in dims) if dims else 1
            visit(op.operands[1].owner, max(bound, 1), set())
        elif op.opcode == "scatter":
            dn = op.attributes.get("scatter_dimension_numbers", {})
            dims = dn.get("scatter_dims_to_operand_dims", [0])
            operand = op.operands[0].type
            if operand.is_tuple:
                operand = operand.tuple_shapes[0]
            dims = [d for d in dims if 0 <= d < operand.rank]
            bound = min(operand.dims[d] for d in dims) if dims else 1
            n_ops = len(op.operands)
            visit(op.operands[n_ops // 2].owner, max(bound, 1), set())
    return bounds, promises


ID_CASES = ("mixed", "duplicates", "out_of_range")


def draw_ids(rng: np.random.Generator, size: int, n: int, case: str | None = None
             ) -> np.ndarray:
    """Ids for a table of ``n`` rows, as int64: ``None``/"mixed" in [-n-3, n+3) (negative,
    in-range and out-of-range ones, duplicates where size > 2n+6), "duplicates" one id
    everywhere, "out_of_range" only ids outside [0, n) (-1 among them)."""
    if case == "duplicates":
        return np.full(size, rng.integers(0, max(n, 1)), np.int64)
    if case == "out_of_range":
        x = rng.choice([-n - 2, n, n + 5, -1], size=size) if n else rng.integers(-3, 3, size)
        return x.astype(np.int64)
    return rng.integers(-n - 3, n + 3, size=size).astype(np.int64)


def _id_dtype(dt: np.dtype) -> bool:
    """Ids of this type can be redrawn: integers wider than a byte, or floats a model converts
    to integers (f32/f64: every id the draws make is exact)."""
    return (dt.kind in "iu" and dt.itemsize > 1) or dt in (np.float32, np.float64)


def edge_id_inputs(module: Module, base: list[np.ndarray], seed: int = 0
                   ) -> dict[str, list[np.ndarray]]:
    """``base`` with the ids of every gather/scatter index parameter redrawn per ``ID_CASES``
    (values the original module defines: XLA clamps gather starts and drops out-of-range
    scatter updates). "out_of_range" redraws gather indices only (with every segment id out
    of range too, every update would be dropped and nothing compared). Promises are kept: ids
    reaching an ``indices_are_sorted`` op are sorted, ids reaching a ``unique_indices`` one
    are not redrawn. Empty: no index parameter."""
    bounds, promises = _index_uses(module)
    params = sorted(module.entry.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    nums = [i for i, p in enumerate(params)
            if p.attributes.get("parameter_number", i) in bounds and i < len(base)
            and _id_dtype(np.asarray(base[i]).dtype)
            and "unique_indices" not in promises.get(p.attributes.get("parameter_number", i), ())]
    if not nums:
        return {}
    rng = np.random.default_rng([seed, 1])
    out = {}
    for case in ID_CASES:
        inputs = list(base)
        for i in nums:
            num = params[i].attributes.get("parameter_number", i)
            if case == "out_of_range" and "gather" not in promises.get(num, ()):
                continue
            a = np.asarray(base[i])
            x = draw_ids(rng, a.size, bounds[num], case)
            if a.dtype.kind in "iu":
                info = np.iinfo(a.dtype)
                x = np.clip(x, max(info.min, -(2**62)), min(info.max, 2**62))
            if "indices_are_sorted" in promises.get(num, ()):
                x = np.sort(x)
            inputs[i] = x.astype(a.dtype).reshape(a.shape)
        out[case] = inputs
    return out


def random_array(shape: Shape, rng: np.random.Generator, high: int = 10) -> np.ndarray:
    """Random values made directly in the target dtype (floats via float32 at most), so a
    large input never needs a float64 copy of itself."""
    et, dims = shape.element_type, shape.dims
    if et == "pred":
        return rng.integers(0, 2, size=dims, dtype=np.uint8).astype(bool)
    if et in FLOAT_TYPES:
        wide = np.float64 if shape.dtype == np.float64 else np.float32
        arr = rng.standard_normal(dims, dtype=wide)
        return arr if arr.dtype == shape.dtype else arr.astype(shape.dtype)
    if et in INT_TYPES:
        native = np.dtype(shape.dtype).kind in "iu" and np.dtype(shape.dtype).itemsize >= 1
        gen = shape.dtype if native else np.int8  # ml_dtypes' 4-bit ints: via int8
        hi = min(max(high, 1), int(np.iinfo(gen).max), int(ml_iinfo(shape.dtype)) + 1)
        arr = rng.integers(0, hi, size=dims, dtype=gen)
        return arr if native else arr.astype(shape.dtype)
    if et in ("c64", "c128"):
        wide = np.float64 if et == "c128" else np.float32
        arr = np.empty(dims, shape.dtype)
        arr.real = rng.standard_normal(dims, dtype=wide)
        arr.imag = rng.standard_normal(dims, dtype=wide)
        return arr
    raise ValueError(f"cannot make a random {shape}")


def ml_iinfo(dtype: np.dtype) -> int:
    try:
        return int(np.iinfo(dtype).max)
    except ValueError:
        import ml_dtypes

        return int(ml_dtypes.iinfo(dtype).max)


def max_run_bytes() -> int:
    try:
        return int(os.environ.get("EMBER_XLA_MAX_RUN_BYTES", MAX_RUN_BYTES))
    except ValueError:
        return MAX_RUN_BYTES


def check_budget(module: Module) -> None:
    """Refuse a module whose entry parameters or result need more than ``max_run_bytes()``."""
    limit = max_run_bytes()
    total = 0
    items = [(f"parameter {p.name}", p.result.type) for p in module.entry.params()]
    items.append(("the result", module.entry.root.result.type))
    for what, shape in items:
        n = shape_bytes(shape)
        total += n
        if n > limit or total > limit:
            raise ValueError(f"{what} {shape} needs {n / 2**30:.3g} GiB; inputs and outputs "
                             f"above {limit / 2**30:.3g} GiB are refused "
                             "(set EMBER_XLA_MAX_RUN_BYTES to allow more)")


def shape_bytes(shape: Shape) -> int:
    """The bytes of an array (or a tuple's arrays) of ``shape``."""
    if shape.is_tuple:
        return sum(shape_bytes(t) for t in shape.tuple_shapes)
    try:
        item = np.dtype(shape.dtype).itemsize
    except (TypeError, ValueError, KeyError):
        item = 8
    n = item
    for d in shape.dims:
        n *= max(d, 0)
    return n


def random_inputs(module: Module, seed: int = 0,
                  bound: dict[int, np.ndarray] | None = None) -> list[np.ndarray]:
    """One array per entry parameter; parameters in ``bound`` take the given values."""
    check_budget(module)
    rng = np.random.default_rng(seed)
    bounds = _index_bounds(module)
    params = sorted(module.entry.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    out = []
    for p in params:
        num = p.attributes.get("parameter_number", 0)
        if bound and num in bound:
            out.append(np.asarray(bound[num]))
            continue
        shape = p.result.type
        if shape.is_tuple:
            raise ValueError(f"parameter {p.name} is a tuple {shape}; give inputs explicitly")
        if num in bounds and shape.element_type in FLOAT_TYPES:  # float ids: whole numbers
            out.append(rng.integers(0, bounds[num], size=shape.dims).astype(shape.dtype))
            continue
        out.append(random_array(shape, rng, bounds.get(num, 10)))
    return out
