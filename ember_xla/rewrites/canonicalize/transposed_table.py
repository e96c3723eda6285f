"""``transposed-table``: lookups vectorized over the table's row dim -- ``jax.vmap`` over the
embedding axis, which penzai's named-axis indexing (``table[{"vocab": ids}]``) always emits --
into the canonical row gather and row scatter the cluster patterns match.

``vmap(lambda col: col[ids], in_axes=1)(T)`` gathers whole columns of ``transpose(T) [D,N]``
(``start_index_map={1}``, slice ``[D,1]``), giving the looked-up rows with D first:
``[D, lead..., 1]``. Its transpose (the gradient) scatter-adds ``[D, lead..., 1]`` windows
into a ``[D,N]`` zero buffer and transposes the sum back to ``[N,D]``. Both are the row
lookup / row scatter of ``T`` with their operands permuted:

    gather(transpose(T), i) [D,lead..,1]  => transpose(gather(T, i) [lead..,D])
    transpose(scatter(Z [D,N], i, U))     => scatter(Z' [N,D], i, transpose(U) [lead..,D])
    select(ok, transpose(rows), NaN)      => transpose(select(ok', rows, NaN))   (jnp.take's fill)
    transpose(transpose(rows))            => rows, or one transpose   (penzai's ``unwrap``)

Gathers and scatters move whole rows: each lookup reads (each update adds into) the same
elements in the same order as before, only the array holding them is permuted, so no bit
changes. A bag reduced while its rows are still D-first stays in XLA (lookup.py says why: its
[D,B] result's layout is XLA's choice for the code after it, which a [B,D] call would change).
"""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import row_gather, row_lookup


def _transposed_table(v: Value) -> Value | None:
    """``T [N,D]`` if ``v`` is ``transpose(T, {1,0})``."""
    op = v.owner
    if (op is None or op.opcode != "transpose" or op.attributes.get("dimensions") != [1, 0]
            or v.type.rank != 2):
        return None
    return op.operands[0]


def _lead_ids(emit: Emit, idx: Value, ivd: int) -> Value | None:
    """Indices as ``[lead..., 1]`` (index vector last), or None for another layout."""
    dims = tuple(idx.type.dims)
    if ivd == len(dims):
        return emit.reshape(idx, dims + (1,))
    if ivd == len(dims) - 1 and dims[-1] == 1:
        return idx
    return None


def _window(window_dims: list[int], kept: list[int], d: int, dims: tuple[int, ...]
            ) -> tuple[int, tuple[int, ...]] | None:
    """Where the D column sits in a gather's output / scatter's update and that shape with
    the column's unit dim (if kept) squeezed: (position of D, squeezed dims); None unless
    the window is the whole column ``[D(, 1)]``."""
    if len(window_dims) != len(kept) or window_dims != sorted(window_dims):
        return None
    sizes = [dims[p] for p in window_dims]
    if sizes != [d, 1][:len(kept)]:
        return None
    squeezed = tuple(x for k, x in enumerate(dims) if k not in window_dims[1:])
    return window_dims[0], squeezed


def _to_rows_perm(pos: int, rank: int) -> list[int]:
    """The transpose of ``[lead..., D]`` that puts D at ``pos`` (lead order kept)."""
    lead = list(range(rank - 1))
    return lead[:pos] + [rank - 1] + lead[pos:]


def _from_rows_perm(pos: int, rank: int) -> list[int]:
    """The transpose of a shape with D at ``pos`` that puts D last."""
    return [k for k in range(rank) if k != pos] + [pos]


def transposed(emit: Emit, v: Value, perm: list[int]) -> Value:
    """``transpose(v, perm)``, folded into ``v``'s own transpose or broadcast when it is one
    and moved under its convert (the vmapped gradient arrives as a broadcast of a transposed
    pooled gradient, converted to the table's type)."""
    if perm == list(range(len(perm))):
        return v
    op = v.owner
    if op is not None and op.opcode == "transpose":
        inner = op.attributes["dimensions"]
        return transposed(emit, op.operands[0], [inner[p] for p in perm])
    dims = tuple(v.type.dims[p] for p in perm)
    if op is not None and op.opcode == "convert":
        return emit.op("convert", [transposed(emit, op.operands[0], perm)],
                       Shape.array(v.type.element_type, dims))
    if op is not None and op.opcode == "broadcast":
        src_dims = op.attributes.get("dimensions", [])
        where = {p: j for j, p in enumerate(perm)}          # v dim -> new dim
        new_pos = [where[b] for b in src_dims]
        order = sorted(range(len(new_pos)), key=new_pos.__getitem__)
        src = transposed(emit, op.operands[0], order)
        return emit.broadcast(src, dims, sorted(new_pos))
    return emit.op("transpose", [v], Shape.array(v.type.element_type, dims),
                   {"dimensions": list(perm)})


class ColumnGather(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "gather":
            return
        table = _transposed_table(op.operands[0])
        if table is None:
            return
        n, d = table.type.dims
        dn = op.attributes.get("gather_dimension_numbers", {})
        collapsed = dn.get("collapsed_slice_dims", [])
        if (dn.get("start_index_map") != [1] or collapsed not in ([], [1])
                or dn.get("operand_batching_dims")
                or op.attributes.get("gather_slice_sizes") != [d, 1]):
            return
        out = tuple(op.result.type.dims)
        place = _window(dn.get("offset_dims", []), [0, 1][:2 - len(collapsed)], d, out)
        if place is None:
            return
        pos, squeezed = place
        emit = Emit(rw, op)
        idx = _lead_ids(emit, op.operands[1], dn.get("index_vector_dim", 0))
        if idx is None:
            return
        rows = row_gather(emit, table, idx, op)                          # [lead..., D]
        cols = transposed(emit, rows, _to_rows_perm(pos, rows.type.rank))  # squeezed dims
        for user, _ in list(op.result.uses):                           # jax's squeeze of it
            if user.opcode == "reshape" and tuple(user.result.type.dims) == squeezed:
                rw.replace_op(user, cols)
        if op.result.uses or op is getattr(op.parent, "root", None):
            rw.replace_op(op, emit.reshape(cols, out))
        else:
            rw.erase(op)


class ColumnScatter(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "transpose" or op.attributes.get("dimensions") != [1, 0]:
            return
        s = op.operands[0].owner
        if s is None or s.opcode != "scatter" or len(s.operands) != 3 or len(
                s.result.uses) != 1 or s.operands[0].type.rank != 2:
            return
        init, idx, upd = s.operands
        d, n = init.type.dims
        dn = s.attributes.get("scatter_dimension_numbers", {})
        inserted = dn.get("inserted_window_dims", [])
        if (dn.get("scatter_dims_to_operand_dims") != [1] or inserted not in ([], [1])
                or dn.get("input_batching_dims")):
            return
        place = _window(dn.get("update_window_dims", []), [0, 1][:2 - len(inserted)], d,
                        tuple(upd.type.dims))
        if place is None:
            return
        pos, squeezed = place
        emit = Emit(rw, op)
        ids = _lead_ids(emit, idx, dn.get("index_vector_dim", 0))
        if ids is None:
            return
        r = ids.type.rank - 1
        if len(squeezed) != r + 1:
            return
        src = upd.owner
        if src is not None and src.opcode == "reshape" and tuple(
                src.operands[0].type.dims) == squeezed:
            upd = src.operands[0]
        rows = transposed(emit, emit.reshape(upd, squeezed), _from_rows_perm(pos, r + 1))
        attrs = dict(s.attributes)
        attrs["scatter_dimension_numbers"] = {
            "update_window_dims": [r], "inserted_window_dims": [0],
            "scatter_dims_to_operand_dims": [0], "index_vector_dim": r}
        base = transposed(emit, init, [1, 0])
        new = emit.op("scatter", [base, ids, rows], Shape.array(
            s.result.type.element_type, (n, d)), attrs, list(s.callees), name=s.name)
        rw.replace_op(op, new)


class TransposeOfTransposedRows(RewritePattern):
    """``transpose(transpose(rows))`` (penzai's ``unwrap`` of looked-up rows) is one
    transpose, none when they cancel."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "transpose":
            return
        inner = op.operands[0].owner
        if (inner is None or inner.opcode != "transpose" or len(inner.result.uses) != 1
                or row_lookup(inner.operands[0]) is None):
            return
        rw.replace_op(op, transposed(Emit(rw, op), op.operands[0], op.attributes["dimensions"]))
        if not inner.result.uses:
            rw.erase(inner)


class FillOfTransposedRows(RewritePattern):
    """``jnp.take``'s fill around D-first rows, ``select(in_bounds, transpose(rows), NaN)``,
    moved under the transpose, where ``lookups.row_lookup`` sees the fill of a row gather."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "select" or len(op.operands) != 3:
            return
        pred, x, fill = op.operands
        t = x.owner
        if (t is None or t.opcode != "transpose" or len(x.uses) != 1
                or row_lookup(t.operands[0]) is None
                or any(v.owner is None or v.owner.opcode != "broadcast" for v in (pred, fill))):
            return
        perm = t.attributes["dimensions"]
        inv = [perm.index(k) for k in range(len(perm))]
        emit = Emit(rw, op)
        rows = t.operands[0]
        sel = emit.op("select", [transposed(emit, pred, inv), rows, transposed(emit, fill, inv)],
                      rows.type, name=op.name)
        rw.replace_op(op, transposed(emit, sel, perm))
        rw.erase(t)                     # its use of the rows would hide their single use


@register_pass
class TransposedTablePass(PatternPass):
    name = "transposed-table"
    rewrites = (ColumnGather, ColumnScatter, FillOfTransposedRows, TransposeOfTransposedRows)
