"""``squeeze-scatter``: the transpose of a vmapped per-example row lookup (equinox's
``Embedding`` under ``vmap`` in a training step) into the canonical row scatter the backward
pattern matches -- the mirror of ``squeeze-gather``.

``jax.vmap`` of ``table[i]`` (``dynamic_slice`` of a ``[1, D]`` row) is a gather of ``[1, D]``
slices at start indices ``concatenate(i, 0)``; its transpose is a scatter of ``[..., 1, D]``
update windows (``update_window_dims={r,r+1}``, ``inserted_window_dims={}``,
``scatter_dims_to_operand_dims={0,1}``) at ``clamp(0, concatenate(i, 0), [V-1, 0])`` (the
clamp ``dynamic_slice`` applies to its start indices, explicit in the scatter). The column
start is 0 (a constant 0, or any value clamped into ``[0, 0]``) and the window is the whole
row, so every update lands exactly where the row scatter ``scatter(T, i', rows)`` with
``inserted_window_dims={0}`` puts it, in the same order (``i'`` the clamped row index;
out-of-range rows are dropped by both): the rewrite changes no bit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit, constant_array
from ember_xla.rewrites.refs import Ref, scalar_constant


def _bound(v: Value) -> np.ndarray | None:
    """The two start components ``c`` a clamp bound holds at every index: a scalar or splat
    constant, or ``broadcast(constant c)`` along the last dim of ``[..., 2]``; else None."""
    s = scalar_constant(Ref(v))
    if s is not None:
        return np.full(2, s)
    op = v.owner
    if op.opcode == "broadcast" and op.attributes.get("dimensions") == [v.type.rank - 1]:
        arr = constant_array(op.operands[0])
        if arr is not None and arr.shape == (2,):
            return arr.astype(np.float64)
    return None


def _row_and_column(idx: Value, row_col: int) -> tuple[Value, Value] | None:
    """(row start [..., 1], column start [..., 1]) of a two-operand ``concatenate``."""
    op = idx.owner
    r = idx.type.rank - 1
    if (op.opcode == "concatenate" and op.attributes.get("dimensions") == [r]
            and len(op.operands) == 2 and all(o.type.dims[-1] == 1 for o in op.operands)):
        return op.operands[row_col], op.operands[1 - row_col]
    return None


def _row_indices(emit: Emit, idx: Value, row_col: int, rows: int) -> Value | None:
    """The row start of each update window as ``[..., 1]`` indices, or None when the column
    start is not provably 0."""
    op = idx.owner
    if op.opcode == "clamp" and len(op.operands) == 3:
        lo, hi = _bound(op.operands[0]), _bound(op.operands[2])
        parts = _row_and_column(op.operands[1], row_col)
        if (lo is None or hi is None or parts is None or lo[1 - row_col] != 0
                or hi[1 - row_col] != 0 or lo[row_col] != 0 or hi[row_col] != rows - 1):
            return None
        row = parts[0]
        et = row.type.element_type
        return emit.op("clamp", [emit.splat(0, et, row.type.dims), row,
                                 emit.splat(rows - 1, et, row.type.dims)], row.type)
    parts = _row_and_column(idx, row_col)
    if parts is None or scalar_constant(Ref(parts[1])) != 0:
        return None
    return parts[0]


class SqueezeScatter(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "scatter" or len(op.operands) != 3:
            return
        table, idx, upd = op.operands
        if table.type.rank != 2 or idx.type.rank < 1:
            return
        n, d = table.type.dims
        dn = op.attributes.get("scatter_dimension_numbers", {})
        r = idx.type.rank - 1
        if (dn.get("index_vector_dim", 0) != r or idx.type.dims[-1] != 2
                or sorted(dn.get("scatter_dims_to_operand_dims", [])) != [0, 1]
                or dn.get("inserted_window_dims", []) or dn.get("input_batching_dims")
                or dn.get("update_window_dims", []) != [r, r + 1]
                or upd.type.rank != r + 2 or tuple(upd.type.dims[r:]) != (1, d)):
            return
        emit = Emit(rw, op)
        rows = _row_indices(emit, idx, dn["scatter_dims_to_operand_dims"].index(0), n)
        if rows is None:
            return
        src = upd.owner
        flat = tuple(upd.type.dims[:r]) + (d,)
        if src.opcode == "reshape" and tuple(src.operands[0].type.dims) == flat:
            rows_upd = src.operands[0]
        else:
            rows_upd = emit.reshape(upd, flat)
        attrs = dict(op.attributes)
        attrs["scatter_dimension_numbers"] = {
            "update_window_dims": [r], "inserted_window_dims": [0],
            "scatter_dims_to_operand_dims": [0], "index_vector_dim": r}
        new = emit.op("scatter", [table, rows, rows_upd], Shape.array(
            op.result.type.element_type, op.result.type.dims), attrs, list(op.callees),
            name=op.name)
        rw.replace_op(op, new)


@register_pass
@dataclasses.dataclass(frozen=True)
class SqueezeScatterPass(PatternPass):
    name = "squeeze-scatter"

    def patterns(self) -> list[RewritePattern]:
        return [SqueezeScatter()]
