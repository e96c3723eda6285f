"""Match the lookup half of a cluster: rows = table[indices], as JAX and TF export it.

Recognised (see docs/IDIOMS.md): a canonical row ``gather`` (XLA clamps: ``clip``), the
``jnp.take`` fill chain (``select(0 <= i <= N-1, gather, NaN)`` -> ``fill``; with
``fill_value=0``, as ``jax.experimental.sparse``'s BCOO products read the dense operand, ->
``zero``), the negative-index
wrap ``select(i < 0, i + N, i)`` (-> ``wrap_negative``), index reshapes, and JAX's s64 -> s32
index ``convert`` (-> ``index_bits=32``); through JAX's ``call``s to ``_take``/``_where``.
"""

from __future__ import annotations

import dataclasses
import math

from ember_xla.hlo.shape import FLOAT_TYPES
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.refs import Ref, first_producer, resolve, scalar_constant, step_out
from ember_xla.rewrites.walk import NoMatch, Walk

#: Why a gather over stacked tables (``jax.vmap`` of a lookup over a [K,N,D] stack) is not a
#: lookup: ``stacked-tables`` regroups the whole-row ones whose K*N rows fit the index type.
STACKED_UNTAKEN = ("gather {name} reads stacked tables {table} per batch (jax.vmap over the "
                   "tables) that stacked-tables did not regroup into one table (it takes "
                   "whole-row lookups whose K*N rows fit the index type)")
#: Why a bag of rows looked up with the row dim first (``jax.vmap`` over the table's columns,
#: penzai's named-axis lookups) stays in XLA: its [D, ...] result keeps the layout XLA gives
#: the code after it; a call's [..., D] result would change that layout, and with it the order
#: XLA:CPU adds that code in (a loss after the bag moved by an ulp when this was tried).
D_FIRST_UNTAKEN = ("the bag sums rows of gather {name} with the row dim first (jax.vmap over "
                   "the table's columns, penzai's named axes): a call's [B,D] result would "
                   "change the layout XLA gives the code after it, and the order it adds that "
                   "code in, so the bag stays in XLA")


@dataclasses.dataclass
class Lookup:
    table: Ref
    indices: Ref          # top-level value holding the raw indices (leading dims = lookups)
    lookup_dims: tuple[int, ...]
    index_mode: str       # clip | fill | zero
    wrap_negative: bool
    index_bits: int       # 32 when the indices pass through a s64->s32 convert, else 64


def _same_elements_reshape(ref: Ref) -> bool:
    op = ref.op
    return op.opcode in ("reshape", "bitcast") and op.operands[0].type.size == op.result.type.size


def match_wrap(ref: Ref, n_rows: int) -> Ref | None:
    """If ``ref`` is ``select(x < 0, x + N, x)`` with N = n_rows, return x."""
    op = ref.op
    if op.opcode != "select":
        return None
    cmp, add, x = (ref.operand(i) for i in range(3))
    if cmp.op.opcode != "compare" or cmp.op.attributes.get("comparison_direction") != "LT":
        return None
    if add.op.opcode != "add":
        return None
    cx, c0 = cmp.operand(0), cmp.operand(1)
    if cx.value is not x.value or scalar_constant(c0) != 0:
        return None
    a0, a1 = add.operand(0), add.operand(1)
    raw = Ref(op.operands[2], ref.stack)  # unresolved: the caller decides whether to step in
    if a0.value is x.value and scalar_constant(a1) == n_rows:
        return raw
    if a1.value is x.value and scalar_constant(a0) == n_rows:
        return raw
    return None


def _wrap_owned(walk: Walk, ref: Ref) -> None:
    """Claim the select/compare/add of a matched wrap (constants stay shared)."""
    walk.take(ref)
    for i in (0, 1):
        walk.take(ref.operand(i))


_INDEX_OPS = ("reshape", "convert", "select", "clamp", "add", "broadcast")


def loop_index_type(idx: Value, depth: int = 6) -> str:
    """"s64" when the gather's ids are computed from s64 ids within a few index ops (jnp.take
    converts them to s32 after its bounds test, which the loop still computes on s64)."""
    seen, frontier = set(), [idx]
    for _ in range(depth):
        nxt = []
        for v in frontier:
            if v.type.element_type == "s64":
                return "s64"
            op = v.owner
            if op is not None and op.opcode in _INDEX_OPS and id(op) not in seen:
                seen.add(id(op))
                nxt.extend(op.operands)
        frontier = nxt
    return idx.type.element_type


def index_chain(walk: Walk, ref: Ref, n_rows: int) -> tuple[Ref, bool, int]:
    """Walk back from a gather's indices through reshapes, one s64->s32 convert and one wrap;
    stop where the chain leaves the cluster. Returns (raw indices, wrap_negative, index_bits).

    A top-level call is stepped into only if the walk comes back out of it (JAX's ``_where``
    or ``_take`` wrappers); otherwise the call's result itself is the raw index value."""
    wrap, bits = False, 64
    saved: tuple[int, Ref, bool, int] | None = None
    while True:
        ref = step_out(ref)
        if ref.top and ref.op.opcode == "call":
            if not walk.can_take(ref):
                break
            saved = (walk.snapshot(), ref, wrap, bits)
        ref = walk.enter(ref)
        op = ref.op
        if ref.top and not walk.can_take(ref):
            break
        if _same_elements_reshape(ref):
            walk.take(ref)
            ref = Ref(op.operands[0], ref.stack)
            continue
        if (op.opcode == "convert" and not wrap and bits == 64
                and op.operands[0].type.element_type == "s64"
                and op.result.type.element_type == "s32"):
            walk.take(ref)
            bits = 32
            ref = Ref(op.operands[0], ref.stack)
            continue
        if not wrap:
            x = match_wrap(ref, n_rows)
            if x is not None:
                try:
                    _wrap_owned(walk, ref)
                except NoMatch:
                    break
                wrap = True
                ref = x
                continue
        break
    if not ref.top and saved is not None and len(saved[1].stack) == 0:
        mark, ref, wrap, bits = saved  # the index comes out of a call we cannot see through
        walk.restore(mark)
    if not ref.top:
        raise NoMatch(f"the indices are computed inside {ref.op.parent.name} by "
                      f"{ref.op.opcode} {ref.op.name}, which the lookup kernels do not model")
    return ref, wrap, bits


def picks_elements(op: Operation) -> bool:
    """Whether a gather picks single elements by two or more coordinates rather than reading
    rows: ``jnp.take_along_axis`` (a log-probability per label, a top-k's values) slices one
    element of an operand whose last dim holds more, indexed or batched along two dims or more.
    A lookup reads by one coordinate, also in a table of one-wide rows ([N,1], [N])."""
    if op.opcode != "gather" or not op.operands[0].type.dims:
        return False
    dn = op.attributes.get("gather_dimension_numbers", {})
    coordinates = len(dn.get("start_index_map", [])) + len(dn.get("operand_batching_dims", []))
    return (op.operands[0].type.dims[-1] > 1 and coordinates >= 2
            and all(s == 1 for s in op.attributes.get("gather_slice_sizes", [])))


#: Element types the kernels read tables and summed rows in.
TABLE_TYPES = ("f32", "bf16", "f16")
#: Integer element types of tables whose looked-up rows a model converts to floats (a quantized
#: table: int8 rows with a scale per row, as in FBGEMM's and TorchRec's int8 tables).
INTEGER_TYPES = ("s4", "s8", "s16", "s32", "u4", "u8", "u16", "u32")
_SAME_ROWS = ("reshape", "bitcast", "copy", "transpose")


def quantized_reason(element_type: str) -> str:
    """Why a lookup of an integer (quantized) table's rows stays in XLA."""
    return (f"{element_type} rows of an integer (e.g. quantized) table converted to floats: the "
            f"kernels read {', '.join(TABLE_TYPES)} tables, so it stays in XLA")


def quantized_rows(op: Operation) -> str | None:
    """The integer element type of a gather of [N,D] integer rows that are converted to a
    float type (a quantized table's lookup), or None, looking through reshapes, bitcasts,
    copies and transposes of the rows. Integer gathers that are not converted
    to floats (ids read from a sparse matrix's index array) are no lookups of rows."""
    if op.opcode != "gather" or picks_elements(op):
        return None
    table = op.operands[0].type
    if table.rank != 2 or table.element_type not in INTEGER_TYPES:
        return None
    frontier = [op]
    for _ in range(3):
        nxt = []
        for o in frontier:
            for u in o.users:
                if u.opcode == "convert" and u.result.type.element_type in FLOAT_TYPES:
                    return table.element_type
                if u.opcode in _SAME_ROWS:
                    nxt.append(u)
        frontier = nxt
    return None


def _check_gather(g: Ref) -> tuple[int, int]:
    op = g.op
    table, idx = op.operands[0].type, op.operands[1].type
    if picks_elements(op):
        raise NoMatch(f"gather {op.name} picks single elements of {table.to_text(False)} "
                      f"(take_along_axis), no table rows")
    if table.rank != 2:
        if op.attributes.get("gather_dimension_numbers", {}).get("operand_batching_dims"):
            raise NoMatch(STACKED_UNTAKEN.format(name=op.name, table=table.to_text(False)))
        raise NoMatch(f"gather {op.name} reads a rank-{table.rank} operand, not a [N,D] table")
    n, d = table.dims
    dn = op.attributes.get("gather_dimension_numbers", {})
    ivd = dn.get("index_vector_dim", 0)
    out = op.result.type
    want_ivd = idx.rank - 1 if idx.rank and idx.dims[-1] == 1 else idx.rank
    if ivd != want_ivd and not (ivd == idx.rank):
        raise NoMatch(f"gather {op.name}: index_vector_dim={ivd} is not the trailing index dim")
    ok = (dn.get("collapsed_slice_dims", []) == [0] and dn.get("start_index_map", []) == [0]
          and dn.get("offset_dims", []) == [out.rank - 1]
          and op.attributes.get("gather_slice_sizes", []) == [1, d]
          and not dn.get("operand_batching_dims"))
    if not ok:
        raise NoMatch(f"gather {op.name} does not read whole rows (dimension numbers {dn}, "
                      f"slice_sizes {op.attributes.get('gather_slice_sizes')})")
    if table.element_type not in FLOAT_TYPES - {"f64"}:
        raise NoMatch(f"gather {op.name}: table type {table.element_type} is not f32/bf16/f16")
    if idx.element_type not in ("s32", "s64"):
        raise NoMatch(f"gather {op.name}: index type {idx.element_type} is not s32/s64")
    return n, d


def fill_mode(fill: float | None) -> str | None:
    """The index mode of ``jnp.take``'s fill chain with fill value ``fill``: NaN -> ``fill``,
    +0 -> ``zero``, anything else None."""
    if fill is None:
        return None
    if math.isnan(fill):
        return "fill"
    return "zero" if fill == 0.0 and math.copysign(1.0, fill) > 0 else None


def _match_fill(walk: Walk, sel: Ref) -> tuple[Ref, str] | None:
    """``select(broadcast(reduce(and(i >= 0, i <= N-1))), gather(T, i), broadcast(F))``, F NaN
    or +0: return the gather ref and the index mode, or None if ``sel`` is not that."""
    pred, g, fillv = (sel.operand(i) for i in range(3))
    mode = fill_mode(scalar_constant(fillv))
    if mode is None or g.op.opcode != "gather":
        return None
    idx = g.op.operands[1]
    n = g.op.operands[0].type.dims[0] if g.op.operands[0].type.rank == 2 else -1
    chain = [pred]
    p = pred
    if p.op.opcode in ("broadcast", "reshape"):  # reshape when the row dims are all 1
        src_rank = p.op.operands[0].type.rank
        if p.op.opcode == "broadcast" and p.op.attributes.get("dimensions", []) != list(
                range(src_rank)):
            return None  # the in-bounds flag must follow the lookup dims, not the row
        p = p.operand(0)
        chain.append(p)
    if p.op.opcode == "reduce":
        from ember_xla.rewrites.refs import binary_combiner

        if binary_combiner(p.op) != "and" or scalar_constant(p.operand(1)) != 1.0:
            return None
        p = p.operand(0)
        chain.append(p)
    if p.op.opcode != "and":
        return None
    bounds = {}
    for i in (0, 1):
        c = p.operand(i)
        if c.op.opcode != "compare" or c.op.operands[0] is not idx:
            return None
        bounds[c.op.attributes.get("comparison_direction")] = scalar_constant(c.operand(1))
        chain.append(c)
    if bounds != {"GE": 0.0, "LE": float(n - 1)}:
        return None
    walk.take(sel)
    for r in chain:
        walk.take(r)
    return g, mode


def match_lookup(walk: Walk, rows: Ref) -> Lookup:
    """Match ``rows`` (already claimed by the caller's op) as a table lookup."""
    rows = walk.enter(rows)
    mode = "clip"
    if rows.op.opcode == "select":
        filled = _match_fill(walk, rows)
        if filled is None:
            raise NoMatch(f"{rows.op.name}: select is not jnp.take's out-of-bounds fill")
        rows, mode = filled
    if rows.op.opcode != "gather":
        # a quantized table's converted rows a few steps up (q[ids] * scale + bias)
        integer = first_producer(rows.op, 4, quantized_rows)
        why = f" ({quantized_reason(integer)})" if integer else ""
        raise NoMatch(f"the reduced values come from {rows.op.opcode} {rows.op.name}, "
                      f"not from a row gather{why}")
    n, _ = _check_gather(rows)
    walk.take(rows)
    table = resolve(rows.operand(0))
    if not table.top:
        raise NoMatch(f"the table of {rows.op.name} is computed inside {table.op.parent.name}")
    idx_type = rows.op.operands[1].type
    ivd = rows.op.attributes.get("gather_dimension_numbers", {}).get("index_vector_dim", 0)
    lookup_dims = idx_type.dims[:ivd]
    raw, wrap, bits = index_chain(walk, Ref(rows.op.operands[1], rows.stack), n)
    if raw.value.type.size != math.prod(lookup_dims):
        raise NoMatch(f"indices {raw.op.name} {raw.value.type} do not hold one index per lookup")
    return Lookup(table, raw, tuple(lookup_dims), mode, wrap, bits)
