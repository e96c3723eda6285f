"""``stacked-tables``: the lookup ``jax.vmap`` makes of a per-table lookup over stacked tables
(``vmap(lambda t, i: t[i].sum(1))(tables [K,N,D], ids [K,B,P])``, equinox/flax modules
vmapped over a stack of embeddings) becomes a lookup of one [K*N, D] table:

    gather(T [K,N,D], i [K,...,1]), operand_batching_dims={0}, start_indices_batching_dims={0},
        collapsed_slice_dims={1}, start_index_map={1}, slice_sizes={1,1,D}
    =>  gather(reshape(T) [K*N,D], clamp(0, i, N-1) + k*N)

A batched gather clamps each start index into its own table ([0, N-1]); after the clamp, the
row ``k*N + i`` of the reshaped table is row ``i`` of table ``k``, and the flat gather's own
clamp to [0, K*N-1] changes nothing: the same rows, bit for bit. The ids the cluster then reads
are computed in XLA (clamp, add). Not taken: ``K*N`` beyond the index type, and a gather
wrapped in ``jnp.take``'s fill (its in-bounds test reads the per-table ids; the lookup matcher
names it and the lookup stays in XLA).
"""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit

_INDEX_MAX = {"s32": 2**31 - 1, "s64": 2**63 - 1}


def _stacked_gather(g: Operation) -> bool:
    if g.opcode != "gather" or len(g.operands) != 2:
        return False
    table, idx = g.operands
    if table.type.rank != 3 or idx.type.rank < 2 or idx.type.dims[-1] != 1:
        return False
    k, n, d = table.type.dims
    dn = g.attributes.get("gather_dimension_numbers", {})
    r = idx.type.rank - 1
    return (dn.get("operand_batching_dims") == [0]
            and dn.get("start_indices_batching_dims") == [0]
            and dn.get("collapsed_slice_dims") == [1] and dn.get("start_index_map") == [1]
            and dn.get("index_vector_dim") == r and dn.get("offset_dims") == [r]
            and g.attributes.get("gather_slice_sizes") == [1, 1, d]
            and idx.type.dims[0] == k
            and k * n - 1 <= _INDEX_MAX.get(idx.type.element_type, -1))


class StackedTableGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if not _stacked_gather(op) or any(u.opcode == "select" for u in op.result.users):
            return
        table, idx = op.operands
        k, n, d = table.type.dims
        et = idx.type.element_type
        emit = Emit(rw, op)
        flat = emit.reshape(table, (k * n, d))
        dims = tuple(idx.type.dims)
        clamped = emit.op("clamp", [emit.splat(0, et, dims), idx, emit.splat(n - 1, et, dims)],
                          Shape.array(et, dims))
        which = emit.op("iota", [], Shape.array(et, dims), {"dimensions": [0]})
        base = emit.op("multiply", [which, emit.splat(n, et, dims)], Shape.array(et, dims))
        rows = emit.op("add", [clamped, base], Shape.array(et, dims))
        r = len(dims) - 1
        attrs = {a: v for a, v in op.attributes.items() if a not in (
            "gather_dimension_numbers", "gather_slice_sizes")}
        attrs["gather_dimension_numbers"] = {"offset_dims": [r], "collapsed_slice_dims": [0],
                                             "start_index_map": [0], "index_vector_dim": r}
        attrs["gather_slice_sizes"] = [1, d]
        new = emit.op("gather", [flat, rows], op.result.type, attrs, name=op.name)
        rw.replace_op(op, new)


@register_pass
class StackedTablesPass(PatternPass):
    name = "stacked-tables"
    rewrites = (StackedTableGather,)
