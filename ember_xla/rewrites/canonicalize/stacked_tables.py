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
``select(in_bounds(i), clamp(0, i, N-1) + k*N, -1)`` (the clamp changes no in-bounds id: one
form for every lookup and scatter here) and gets the fill rebuilt for the flat table: an id
out of its table is out of the flat one and reads the same NaN row.

The transpose in a training step, a scatter-add into [K,N,D] with the same batching dims,
becomes a scatter into [K*N,D] reshaped back: an update whose id is out of its own table is
dropped by both, so its flat id is ``select(in_bounds(i), clamp(0, i, N-1) + k*N, -1)``,
which forward-lookup pairs with the lookup's ``clamp(0, i, N-1) + k*N``; ids JAX clamped
(``clamp(0, i, N-1)``, mode clip) become ``clamp(0, i, N-1) + k*N``, the lookup's own flat
ids. Every update lands on the same row in the same order. The optimizer's elementwise
update of the stack that reads the reshaped gradient (``ts - lr * g``, optax's states) is
computed on [K*N,D] too and reshaped after (an elementwise op commutes with a reshape), so
the fused sparse optimizers see a [V,D] table update. Not taken: ``K*N`` beyond the index
type.
"""

from __future__ import annotations

from ember_xla.hlo.opcodes import ELEMENTWISE
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import (
    fill_and,
    row_gather,
    rows_at,
    unclaimed,
    with_fill,
)
from ember_xla.rewrites.refs import unclamped

_INDEX_MAX = {"s32": 2**31 - 1, "s64": 2**63 - 1}


def _stacked(table: Value, idx: Value) -> bool:
    """A [K,N,D] stack read at [K,...,1] ids whose flat rows K*N fit the index type."""
    if table.type.rank != 3 or idx.type.rank < 2 or idx.type.dims[-1] != 1:
        return False
    k, n, _ = table.type.dims
    return idx.type.dims[0] == k and k * n - 1 <= _INDEX_MAX.get(idx.type.element_type, -1)


def _stacked_gather(g: Operation) -> bool:
    if g.opcode != "gather" or len(g.operands) != 2 or not _stacked(*g.operands):
        return False
    d = g.operands[0].type.dims[2]
    dn = g.attributes.get("gather_dimension_numbers", {})
    r = g.operands[1].type.rank - 1
    return (dn.get("operand_batching_dims") == [0]
            and dn.get("start_indices_batching_dims") == [0]
            and dn.get("collapsed_slice_dims") == [1] and dn.get("start_index_map") == [1]
            and dn.get("index_vector_dim") == r and dn.get("offset_dims") == [r]
            and g.attributes.get("gather_slice_sizes") == [1, 1, d])


def _rows(emit: Emit, idx: Value, n: int, keep_out: bool = False) -> Value:
    """The flat row ``clamp(0, i, N-1) + k*N`` [K,...] of each id of table k (``rows_at``)."""
    et, dims = idx.type.element_type, tuple(idx.type.dims)
    return rows_at(emit, idx, n, _bases(emit, et, dims, n), keep_out)


def _as_flat(emit: Emit, v: Value, shape: tuple[int, int]) -> Value:
    """[K,N,D] ``v`` as [K*N,D]: a scalar's broadcast broadcast again, anything else reshaped."""
    op = v.owner
    if op is not None and op.opcode == "broadcast" and not op.attributes.get("dimensions"):
        return emit.broadcast(op.operands[0], shape, [])
    return emit.reshape(v, shape)


def _bases(emit: Emit, et: str, dims: tuple[int, ...], n: int) -> Value:
    which = emit.op("iota", [], Shape.array(et, dims), {"dimensions": [0]})
    return emit.op("multiply", [which, emit.splat(n, et, dims)], Shape.array(et, dims))


class StackedTableGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if not _stacked_gather(op):
            return
        table, idx = op.operands
        k, n, d = table.type.dims
        users = op.result.users
        fill = (fill_and(users[0], op, n) if len(users) == 1 and users[0].opcode == "select"
                else None)
        if fill is None and any(u.opcode == "select" for u in users):
            return  # a select around it that is not jnp.take's fill
        emit = Emit(rw, op if fill is None else users[0])
        flat = emit.reshape(table, (k * n, d))
        rows = row_gather(emit, flat, _rows(emit, idx, n, keep_out=fill is not None), op)
        if fill is None:
            rw.replace_op(op, rows)
        else:
            rw.replace_op(users[0], with_fill(emit, unclaimed(rows), fill))


def _stacked_scatter(op: Operation) -> bool:
    if op.opcode != "scatter" or len(op.operands) != 3 or not _stacked(*op.operands[:2]):
        return False
    idx, upd = op.operands[1:]
    d = op.operands[0].type.dims[2]
    dn = op.attributes.get("scatter_dimension_numbers", {})
    r = idx.type.rank - 1
    return (dn.get("input_batching_dims") == [0]
            and dn.get("scatter_indices_batching_dims") == [0]
            and dn.get("inserted_window_dims") == [1]
            and dn.get("scatter_dims_to_operand_dims") == [1]
            and dn.get("index_vector_dim") == r and dn.get("update_window_dims") == [r]
            and tuple(upd.type.dims) == tuple(idx.type.dims[:-1]) + (d,))


class StackedTableScatter(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if not _stacked_scatter(op):
            return
        table, idx, upd = op.operands
        k, n, d = table.type.dims
        emit = Emit(rw, op)
        flat = _as_flat(emit, table, (k * n, d))
        x = unclamped(idx, n)
        at = _rows(emit, x, n) if x is not None else _rows(emit, idx, n, keep_out=True)
        r = idx.type.rank - 1
        attrs = dict(op.attributes)
        attrs["scatter_dimension_numbers"] = {
            "update_window_dims": [r], "inserted_window_dims": [0],
            "scatter_dims_to_operand_dims": [0], "index_vector_dim": r}
        new = emit.op("scatter", [flat, at, upd],
                      Shape.array(op.result.type.element_type, (k * n, d)), attrs,
                      list(op.callees), name=op.name)
        rw.replace_op(op, emit.reshape(new if x is not None else unclaimed(new), (k, n, d)))


def _from_scatter(v: Value, depth: int = 16) -> bool:
    """Is [K*N,D] ``v`` a scatter, or elementwise ops on one (the update moved so far)?"""
    op = v.owner
    if op is None or depth == 0:
        return False
    if op.opcode == "scatter":
        return True
    return op.opcode in ELEMENTWISE and any(
        o.type.dims == v.type.dims and _from_scatter(o, depth - 1) for o in op.operands)


def _flat_source(v: Value) -> Value | None:
    """The [K*N,D] value of a flat stacked scatter (or of the update moved onto it so far)
    when ``v`` is its reshape to [K,N,D]."""
    op = v.owner
    if op is None or op.opcode != "reshape" or v.type.rank != 3:
        return None
    src = op.operands[0]
    k, n, d = v.type.dims
    if tuple(src.type.dims) != (k * n, d) or not _from_scatter(src):
        return None
    return src


class StackedUpdate(RewritePattern):
    """``E(reshape(g), x, ...)`` [K,N,D] => ``reshape(E(g, reshape(x), ...))``, from a flat
    stacked scatter ``g`` on, op by op down the elementwise update."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode not in ELEMENTWISE or op.result.type.rank != 3 or len(op.results) != 1:
            return
        dims = tuple(op.result.type.dims)
        if any(tuple(x.type.dims) != dims for x in op.operands):
            return
        flats = [_flat_source(x) for x in op.operands]
        if all(f is None for f in flats):
            return
        k, n, d = dims
        emit = Emit(rw, op)
        operands = []
        for x, f in zip(op.operands, flats, strict=True):
            operands.append(f if f is not None else _as_flat(emit, x, (k * n, d)))
        new = emit.op(op.opcode, operands, Shape.array(op.result.type.element_type,
                                                       (k * n, d)), dict(op.attributes),
                      name=op.name)
        rw.replace_op(op, emit.reshape(new, dims))


@register_pass
class StackedTablesPass(PatternPass):
    name = "stacked-tables"
    rewrites = (StackedTableGather, StackedTableScatter, StackedUpdate)
