"""``sliced-table``: a lookup of a table sliced out of a bigger array -- the body of a
``jax.lax.map`` / ``lax.scan`` over stacked tables reads ``dynamic-slice(T [K,N,D], k)``, a model
keeping its tables in one parameter reads ``T[a:b]`` -- becomes a lookup of the whole array
as rows:

    gather(reshape?(dynamic-slice(T [..., M, D], s..., 0) [1, .., 1, N, D]) [N,D], i)
        =>  gather(reshape(T) [R, D], clamp(0, i, N-1) + o)

R is T's row count (the product of every dim but D) and ``o`` the flat row of the slice's
first row, from its start indices as dynamic-slice clamps them (``clamp(0, s_j, dim_j -
size_j)``) or a slice's constant starts. A gather clamps each start index so that its row is
in the table: row ``clamp(0, i, N-1)`` of the slice is row ``clamp(0, i, N-1) + o`` of the flat
array, which the flat gather's own clamp leaves as it is -- the same rows, bit for bit.
``jnp.take``'s fill tests ``i`` against N: the flat lookup reads ``select(0 <= i <= N-1,
clamp(0, i, N-1) + o, -1)`` and gets the fill rebuilt for the flat table (-1 is out of it too).

Why: XLA:CPU fuses the slice into its gather and reads only the rows looked up, while a custom
call takes its operand written out, so a rewritten lookup of a sliced table copies the whole
slice on every call; the flat table is a bitcast of T. Not taken: strided slices, slices not
whole in D, a fill on unsigned ids, R beyond the index type. Scatters into a slice (the
training step's ``dynamic-update-slice`` of a scatter) are left as they are.
"""

from __future__ import annotations

import math

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import (
    fill_and,
    is_row_gather,
    row_gather,
    rows_at,
    unclaimed,
    with_fill,
)

_INDEX_MAX = {"s32": 2**31 - 1, "s64": 2**63 - 1, "u32": 2**32 - 1, "u64": 2**64 - 1}


def row_slice(table: Value) -> Operation | None:
    """The slice or dynamic-slice whose result, reshaped or not, is the [N,D] ``table``, when
    it takes N consecutive whole rows of an array [..., M, D] (unit sizes before M)."""
    op = table.owner
    if op is not None and op.opcode in ("reshape", "bitcast"):
        op = op.operands[0].owner
    if op is None or op.opcode not in ("slice", "dynamic-slice") or table.type.rank != 2:
        return None
    src, (n, d) = op.operands[0].type.dims, table.type.dims
    lead = len(src) - 2
    if lead < 0 or tuple(op.result.type.dims) != (1,) * lead + (n, d) or src[-1] != d:
        return None
    if op.opcode == "slice":
        dims = op.attributes.get("slice_dimensions", [])
        if any(s.get("stride", 1) != 1 for s in dims) or dims[-1].get("start", 0) != 0:
            return None
    return op


def _start(emit: Emit, op: Operation, j: int, et: str) -> Value:
    """The clamped start of dim ``j`` of the slice ``op``, in type ``et``."""
    if op.opcode == "slice":
        return emit.constant(op.attributes["slice_dimensions"][j].get("start", 0), et)
    s = op.operands[1 + j]
    st = s.type.element_type
    hi = op.operands[0].type.dims[j] - op.result.type.dims[j]
    s = emit.op("clamp", [emit.constant(0, st), s, emit.constant(hi, st)], Shape.array(st, ()))
    return s if st == et else emit.op("convert", [s], Shape.array(et, ()))


def _offset(emit: Emit, op: Operation, et: str) -> Value:
    """The flat row of the slice's first row, a scalar of type ``et``."""
    src = op.operands[0].type.dims
    total = None
    for j in range(len(src) - 1):
        stride = math.prod(src[j + 1:-1])
        term = _start(emit, op, j, et)
        if stride != 1:
            term = emit.op("multiply", [term, emit.constant(stride, et)], Shape.array(et, ()))
        total = term if total is None else emit.op("add", [total, term], Shape.array(et, ()))
    return total


class SlicedTableGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if not is_row_gather(op):
            return
        table, idx = op.operands
        sl = row_slice(table)
        if sl is None:
            return
        src = sl.operands[0]
        n, d = table.type.dims
        rows = math.prod(src.type.dims[:-1])
        et = idx.type.element_type
        if rows - 1 > _INDEX_MAX.get(et, -1):
            return
        users = op.result.users
        fill = (fill_and(users[0], op) if len(users) == 1 and users[0].opcode == "select"
                else None)
        if fill is None and any(u.opcode == "select" for u in users):
            return  # a select around it that is not jnp.take's fill
        if fill is not None and et.startswith("u"):
            return
        emit = Emit(rw, op if fill is None else users[0])
        if idx.type.rank == op.result.type.rank - 1:       # ids [lead...]: index vector last
            idx = emit.reshape(idx, tuple(idx.type.dims) + (1,))
        base = emit.broadcast(_offset(emit, sl, et), tuple(idx.type.dims), [])
        at = rows_at(emit, idx, n, base, keep_out=fill is not None)
        new = row_gather(emit, emit.reshape(src, (rows, d)), at, op)
        if fill is not None:
            rw.replace_op(users[0], with_fill(emit, unclaimed(new), fill))
        else:
            rw.replace_op(op, new)


@register_pass
class SlicedTablePass(PatternPass):
    name = "sliced-table"
    rewrites = (SlicedTableGather,)
