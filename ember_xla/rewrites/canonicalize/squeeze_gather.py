"""``squeeze-gather``: the row lookup that ``jax.vmap`` of a per-example lookup emits (equinox's
``Embedding`` under ``vmap``, ``jnp.take`` of a vmapped scalar index) into the canonical row
gather the cluster patterns match.

``vmap`` turns ``table[i]`` (i a scalar) into a gather of ``[1, D]`` slices at start indices
``concatenate(i, 0)`` (``start_index_map={0,1}``, ``collapsed_slice_dims={}``,
``offset_dims={r,r+1}``) followed by a ``reshape`` that squeezes the 1. Because the slice is
the whole row (size D of D), XLA clamps the column start to 0 whatever it is, so the result is
exactly ``gather(table, i)`` with ``collapsed_slice_dims={0}`` (the row index is the first
column of the start indices; a ``concatenate`` is looked through, else it is sliced off).
"""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import row_gather


def _row_indices(emit: Emit, idx: Value, row_col: int) -> Value:
    """The row-index column of ``idx [..., 2]`` as ``[..., 1]``."""
    op = idx.owner
    r = idx.type.rank - 1
    if op.opcode == "concatenate" and op.attributes.get("dimensions") == [r] and all(
            o.type.dims[-1] == 1 for o in op.operands) and len(op.operands) == 2:
        return op.operands[row_col]
    dims = idx.type.dims
    sl = [{"start": 0, "limit": d, "stride": 1} for d in dims[:-1]]
    sl.append({"start": row_col, "limit": row_col + 1, "stride": 1})
    return emit.op("slice", [idx], Shape.array(idx.type.element_type, dims[:-1] + (1,)),
                   {"slice_dimensions": sl})


class SqueezeGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reshape":
            return
        g = op.operands[0].owner
        if g is None or g.opcode != "gather" or len(g.result.uses) != 1:
            return
        table, idx = g.operands[0], g.operands[1]
        if table.type.rank != 2:
            return
        n, d = table.type.dims
        dn = g.attributes.get("gather_dimension_numbers", {})
        r = idx.type.rank - 1
        if (dn.get("index_vector_dim", 0) != r or idx.type.dims[-1] != 2
                or sorted(dn.get("start_index_map", [])) != [0, 1]
                or dn.get("collapsed_slice_dims", []) or dn.get("operand_batching_dims")
                or dn.get("offset_dims", []) != [r, r + 1]
                or g.attributes.get("gather_slice_sizes", []) != [1, d]):
            return
        out = g.result.type  # [..., 1, D]
        want = tuple(out.dims[:r]) + (d,)
        if tuple(op.result.type.dims) != want:
            return
        emit = Emit(rw, op)
        rows = _row_indices(emit, idx, dn["start_index_map"].index(0))
        rw.replace_op(op, row_gather(emit, table, rows, g))


@register_pass
class SqueezeGatherPass(PatternPass):
    name = "squeeze-gather"
    rewrites = (SqueezeGather,)
