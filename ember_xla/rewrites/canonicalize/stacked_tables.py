"""``stacked-tables``: the lookup ``jax.vmap`` makes of a per-table lookup over stacked tables
(``vmap(lambda t, i: t[i].sum(1))(tables [K,N,D], ids [K,B,P])``, equinox/flax modules
vmapped over a stack of embeddings) becomes a lookup of one [K*N, D] table:

    gather(T [K,N,D], i [K,...,1]), operand_batching_dims={0}, start_indices_batching_dims={0},
        collapsed_slice_dims={1}, start_index_map={1}, slice_sizes={1,1,D}
    =>  gather(reshape(T) [K*N,D], clamp(0, i, N-1) + k*N)

A batched gather clamps each start index into its own table ([0, N-1]); after the clamp, the
row ``k*N + i`` of the reshaped table is row ``i`` of table ``k``, and the flat gather's own
clamp to [0, K*N-1] changes nothing: the same rows, bit for bit. The ids the cluster then reads
are computed in XLA (clamp, add). ``jnp.take``'s fill around it (flax ``Embed`` vmapped
over stacked parameters) tests each id against its own table, so the flat lookup reads
``select(in_bounds(i), i + k*N, -1)`` and gets the fill rebuilt for the flat table: an id out
of its table is out of the flat one and reads the same NaN row. Not taken: ``K*N`` beyond the
index type.
"""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import RowLookup, fill_and, relookup

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
        if not _stacked_gather(op):
            return
        table, idx = op.operands
        k, n, d = table.type.dims
        users = op.result.users
        fill = None
        if any(u.opcode == "select" for u in users):
            fill = fill_and(users[0], op, n) if len(users) == 1 else None
            if fill is None:
                return
        et = idx.type.element_type
        dims = tuple(idx.type.dims)
        anchor = users[0] if fill is not None else op
        emit = Emit(rw, anchor)
        flat = emit.reshape(table, (k * n, d))
        which = emit.op("iota", [], Shape.array(et, dims), {"dimensions": [0]})
        base = emit.op("multiply", [which, emit.splat(n, et, dims)], Shape.array(et, dims))
        if fill is None:
            at = emit.op("clamp", [emit.splat(0, et, dims), idx, emit.splat(n - 1, et, dims)],
                         Shape.array(et, dims))
        else:
            at = idx
        rows_at = emit.op("add", [at, base], Shape.array(et, dims))
        r = len(dims) - 1
        attrs = {a: v for a, v in op.attributes.items() if a not in (
            "gather_dimension_numbers", "gather_slice_sizes")}
        attrs["gather_dimension_numbers"] = {"offset_dims": [r], "collapsed_slice_dims": [0],
                                             "start_index_map": [0], "index_vector_dim": r}
        attrs["gather_slice_sizes"] = [1, d]
        if fill is None:
            rw.replace_op(op, emit.op("gather", [flat, rows_at], op.result.type, attrs,
                                      name=op.name))
            return
        sel = users[0]
        ok = emit.reshape(sel.operands[0].owner.operands[0], dims)  # the in-bounds flags
        flat_ids = emit.op("select", [ok, rows_at, emit.splat(-1, et, dims)],
                           Shape.array(et, dims))
        g = emit.op("gather", [flat, flat_ids], op.result.type, attrs, name=op.name)
        lk = RowLookup(sel.result, g.owner, fill)
        rw.replace_op(sel, relookup(emit, lk, emit.reshape(flat_ids, dims[:-1])))


@register_pass
class StackedTablesPass(PatternPass):
    name = "stacked-tables"
    rewrites = (StackedTableGather,)
