"""Lower an ember cluster (a ``ClusterSpec`` read from its custom-call) to an SLC function.

The function takes one memref per custom-call operand, then one per output (attributes
``kind``, ``num_inputs``, ``output_shapes``; see ``interp/run.py``) and ends in ``func.return``.
Per table (k sub-programs, one after the other, for ``grouped_segment_reduce``):

- ``offsets_bag`` (Ember's embedding bag, tests/eb_slc_O0.mlir): three loop levels
  ``for b in [0,B)`` (offsets[b], offsets[b+1] mem streams) -> ``for j in [offsets[b],
  offsets[b+1])`` (the index mem stream, then its preprocessing alu streams) -> ``for k in
  [0,D)`` (the row mem stream ``table[i, k]`` chained on the index stream, one callback per
  element accumulating into ``out[b, k]``). A callback before the j loop (begin of bag)
  writes the row's start value; for mean/sqrt_n one after it (end of bag) scales the row.
- ``padded_bag``: the same with ``for p in [0,P)`` and ``ids[b, p]``.
- ``segment_reduce``: an init loop over the S output rows, then ``for j in [0,L)`` (index and
  segment-id mem streams, an in-range flag for the segment id: ids outside [0,S) are dropped)
  -> ``for k in [0,D)`` with one callback per element into ``out[seg[j], k]``; mean/sqrt_n
  keep per-row counts in a core buffer and finish with a loop over the rows.
- ``grouped_segment_reduce_concat`` (the CPU rewrite's: the tables' results side by side in
  one ``[S, sum D]`` result): each table's segment reduction into a core buffer, then one
  callback per output row copying the tables' rows into their columns.
- ``multi_segment_reduce`` (one lookup, one result per combiner): the same single pass over
  the lookups, each element's callback combining it into every result (each with its own
  combiner, start value and finish: ``ClusterSpec.members``), the rows read once; the
  averaged results share the per-row counts.
Numerics are those of docs/CUSTOM_CALL.md (see ``lower/emit.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from ember_xla.call_specs import (
    BACKWARD_LOWERED,
    IN_PLACE,
    ClusterSpec,
    LoweringRefused,
    Part,
    cluster_spec,
)
from ember_xla.dae_target.dialects import arith, func, memref, scf, slc
from ember_xla.dae_target.lower.emit import (
    Emitter,
    add_lookup,
    coords,
    elem_type,
    fill_row,
    fill_value,
    finish_row,
    looked_up_value,
    preprocess_index,
    start_value,
)
from ember_xla.dae_target.lower.sum_orders import (
    PARTIALS,
    add_to_partial,
    check_order,
    fold_callback,
    scratch,
    zero_partials,
)
from ember_xla.dae_target.lower.to_slc_adagrad import lower_adagrad
from ember_xla.dae_target.lower.to_slc_grad import lower_backward
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import I1, I64, INDEX, MemRefType
from ember_xla.ir.value import Value


class _Ctx:
    """Function-level values shared by every part."""

    def __init__(self, e: Emitter) -> None:
        self.e = e
        self.c0 = e.const(0, INDEX, "c0")
        self.c1 = e.const(1, INDEX, "c1")
        self.s0 = e.stream(self.c0)
        self.s1 = e.stream(self.c1)


#: The summation orders of a padded bag's kernel (``custom_calls.SUM_ORDERS``) whose programs
#: add in the same order: the rows one after the other, a weighted f32 row with one fused
#: multiply-add under ``sequential_fma`` (``emit.add_lookup``), and the CPU rewrite's
#: XLA:CPU orders (YNNPACK's blocked, the vectorized loop's vector8, the tree-reduction
#: windows' tree32: ``sum_orders.py``). Any other order is refused, never lowered in another
#: order than its kernel's.
LOWERED_SUM_ORDERS = ("sequential", "sequential_fma", *PARTIALS)


def lower_to_slc(spec: ClusterSpec) -> Module:
    """The SLC module of one cluster (``LoweringRefused`` when a form is not supported)."""
    import ember_xla.dae_target.dialects  # noqa: F401  (registers the dialects)

    if spec.kind == "padded_bag" and spec.sum_order not in LOWERED_SUM_ORDERS:
        raise LoweringRefused(f"{spec.name}: its kernel adds each bag's rows in XLA:CPU's "
                              f"{spec.sum_order} order (sum_order={spec.sum_order}, the CPU "
                              "rewrite's), which the DAE programs do not reproduce (they add "
                              "the rows in the orders of LOWERED_SUM_ORDERS); emulate the "
                              "original model, which is rewritten for the DAE machine in the "
                              "programs' order")
    if spec.kind == "padded_bag" and spec.sum_order in PARTIALS:
        check_order(spec)
    ins = [MemRefType((None,) * len(a.shape), elem_type(a.dtype)) for a in spec.operands]
    outs = [MemRefType((None,) * len(o.shape), elem_type(o.dtype)) for o in spec.outputs]
    g = Graph(spec.kind, {"kind": spec.kind, "num_inputs": len(ins),
                          "output_shapes": [list(o.shape) for o in spec.outputs]},
              ins + outs)
    grouped = len(spec.parts) > 1 or spec.kind in ("grouped_segment_reduce",
                                                   "multi_segment_reduce")
    for i, role in enumerate(spec.roles):
        suffix = str(i // 3) if grouped else ""
        g.args[i].name_hint = role + suffix
    for k in range(len(outs)):
        g.args[len(ins) + k].name_hint = f"out{k}" if grouped else "out"
    m = Module(f"slc.{spec.name}")
    m.add(g, entry=True)
    e = Emitter(g)
    ctx = _Ctx(e)
    if spec.kind in IN_PLACE:  # updated in place: each result starts as its operand
        g.attributes["output_init"] = [spec.roles.index(r) for r in IN_PLACE[spec.kind]]
    if spec.kind in BACKWARD_LOWERED:
        consts = (ctx.c0, ctx.c1, ctx.s0, ctx.s1)
        args, results = list(g.args[:len(ins)]), list(g.args[len(ins):])
        if spec.kind in ("sparse_adagrad", "sparse_adagrad_keras", "sparse_rowwise_adagrad"):
            lower_adagrad(e, spec, dict(zip(spec.roles, args, strict=True)), results, consts)
        else:
            lower_backward(e, spec, args, results, consts)
        g.append(func.ReturnOp.create([]))
        return m
    concat = spec.kind == "grouped_segment_reduce_concat"
    scratch = []
    for k, part in enumerate(spec.parts):
        args = g.args[part.first_operand:part.first_operand + 3]
        w = g.args[len(ins) - 1] if spec.weighted else None
        if concat:  # each table into a core buffer, then the rows side by side
            out = e.v(memref.AllocOp, [e.dim(g.args[len(ins)], 0), e.dim(args[0], 1)],
                      MemRefType((None, None), elem_type(part.out.dtype)), f"part{k}")
            scratch.append(out)
        else:
            out = g.args[len(ins) + k]
        if spec.kind == "multi_segment_reduce":
            outs_k = list(zip(spec.members(), g.args[len(ins):], strict=True))
            _segment_reduce(ctx, spec, part, args[0], args[1], args[2], w, outs_k)
        elif spec.kind == "padded_bag":
            _padded_bag(ctx, spec, part, args[0], args[1], w, out)
        elif spec.kind == "offsets_bag":
            _offsets_bag(ctx, spec, part, args[0], args[1], args[2], w, out)
        else:
            _segment_reduce(ctx, spec, part, args[0], args[1], args[2], w, [(spec, out)])
    if concat:
        _side_by_side(ctx, spec, scratch, g.args[len(ins)])
    g.append(func.ReturnOp.create([]))
    return m


def _side_by_side(ctx: _Ctx, spec: ClusterSpec, parts: list[Value], out: Value) -> None:
    """The concat target's result: ``for r in [0, S)`` one callback copying row ``r`` of each
    table's result into its columns of ``out`` (table k's from column ``D_0 + .. + D_k-1``)."""
    e = ctx.e
    rows = e.slc_for(ctx.s0, e.stream(e.dim(out, 0, "S")), ctx.s1, "r")
    with e.into(rows.body):
        cb = e.callback()
        with e.into(cb.body):
            r = e.read(rows.iv)
            first = 0
            for part, buf in zip(spec.parts, parts, strict=True):
                width = int(part.out.shape[1])
                base = e.const(first, INDEX)
                loop = e.scf_for(ctx.c0, e.const(width, INDEX), ctx.c1)
                with e.into(loop.body):
                    x = e.v(memref.LoadOp, [buf, r, loop.iv], out.type.elem)
                    col = e.v(arith.AddIOp, [loop.iv, base], INDEX)
                    e.op(memref.StoreOp, [x, out, r, col])
                    e.end(scf.YieldOp, loop.body)
                first += width
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)


def lower_call(op: Operation) -> Module:
    """Read an ember custom-call and lower it."""
    return lower_to_slc(cluster_spec(op))


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def _check_rows(spec: ClusterSpec, part: Part, lookups: int) -> int:
    n = part.table.shape[0]
    if n == 0 and lookups > 0 and spec.index_mode == "clip":
        raise LoweringRefused(f"{spec.name}: index_mode=clip on a table without rows (the "
                              "kernel rejects it too)")
    return n


def _lookup_body(ctx: _Ctx, spec: ClusterSpec, part: Part, table: Value, raw: Value,
                 w: Value | None, out: Value, row_of: Value, s_n: Value, s_d: Value,
                 d: Value, guard: Value | None = None,
                 partial: tuple[Value, Value] | None = None,
                 more: tuple[tuple[ClusterSpec, Value], ...] = ()) -> None:
    """Index preprocessing of one lookup, then ``for k in [0,D)``: the row element stream and
    one callback per element accumulating into ``out[row_of, k]`` (``partial`` = (buffer,
    lookup stream): into a partial sum of ``spec.sum_order`` instead, ``sum_orders.py``;
    ``more``: further (spec, result) pairs the element is combined into, under ``guard``)."""
    e = ctx.e
    n = _check_rows(spec, part, _size(part.lookups.shape))
    row_idx, ok = preprocess_index(e, raw, spec, s_n, n)
    inner = e.slc_for(ctx.s0, s_d, ctx.s1, "k")
    with e.into(inner.body):
        v = e.mem(table, [row_idx, inner.iv]) if row_idx is not None else None
        cb = e.callback()
        with e.into(cb.body):
            r = e.read(row_of)
            c = e.read(inner.iv)
            if guard is not None:
                cond = e.scf_if(e.read(guard))
                with e.into(cond.then_block):
                    for sp, o in ((spec, out), *more):
                        add_lookup(e, sp, o, r, c, v, ok, w, table.type.elem)
                    e.end(scf.YieldOp, cond.then_block)
            elif partial is not None:
                add_to_partial(e, spec.sum_order, partial[0], e.read(partial[1]),
                               _width(part), c, looked_up_value(e, v, ok, w, table.type.elem,
                                                                out.type.elem, fill_value(spec)))
            else:
                add_lookup(e, spec, out, r, c, v, ok, w, table.type.elem)
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, inner.body)


def _begin_row(ctx: _Ctx, spec: ClusterSpec, out: Value, row: Value, d: Value,
               block: Value | None = None) -> None:
    """A callback writing the start value into ``out[row, :]`` (and zeroing the partial sums
    ``block`` of ``spec.sum_order``)."""
    e = ctx.e
    cb = e.callback()
    with e.into(cb.body):
        o = out.type.elem
        fill_row(e, out, e.read(row), d, e.const(start_value(spec, o), o), ctx.c0, ctx.c1)
        if block is not None:
            zero_partials(e, spec.sum_order, block, d, ctx.c0, ctx.c1)
        e.end(slc.YieldOp, cb.body)


def _end_bag(ctx: _Ctx, spec: ClusterSpec, out: Value, row: Value, d: Value,
             count_of: Callable[[], Value]) -> None:
    """mean/sqrt_n: a callback at the end of the bag scaling ``out[row, :]``."""
    if spec.combiner not in ("mean", "sqrt_n"):
        return
    e = ctx.e
    cb = e.callback()
    with e.into(cb.body):
        finish_row(e, spec, out, e.read(row), count_of(), d, ctx.c0, ctx.c1)
        e.end(slc.YieldOp, cb.body)


def _dims(ctx: _Ctx, table: Value) -> tuple[Value, Value, Value, Value]:
    e = ctx.e
    n = e.dim(table, 0, "N")
    d = e.dim(table, 1, "D")
    return n, d, e.stream(n), e.stream(d)


def _offsets_bag(ctx: _Ctx, spec: ClusterSpec, part: Part, table: Value, indices: Value,
                 offsets: Value, w: Value | None, out: Value) -> None:
    e = ctx.e
    _, d, s_n, s_d = _dims(ctx, table)
    nb = e.v(arith.SubIOp, [e.dim(offsets, 0), ctx.c1], INDEX, "B")
    bags = e.slc_for(ctx.s0, e.stream(nb), ctx.s1, "b")
    with e.into(bags.body):
        b = bags.iv
        start = e.mem(offsets, [b])
        end = e.mem(offsets, [e.alu("add", [b, ctx.s1])])
        _begin_row(ctx, spec, out, b, d)
        lookups = e.slc_for(e.alu("cast", [start]), e.alu("cast", [end]), ctx.s1, "j")
        with e.into(lookups.body):
            j = lookups.iv
            lk = part.lookups.shape
            raw = e.mem(indices, coords(e, indices, lk, lk[:1], [j], ctx.s0))
            ws = (e.mem(w, coords(e, w, part.weights.shape, lk[:1], [j], ctx.s0))
                  if w is not None else None)
            _lookup_body(ctx, spec, part, table, raw, ws, out, b, s_n, s_d, d)
            e.end(slc.YieldOp, lookups.body)

        def count() -> Value:
            return e.v(arith.SubIOp, [e.read(end), e.read(start)], start.type.elem)

        _end_bag(ctx, spec, out, b, d, count)
        e.end(slc.YieldOp, bags.body)


def _width(part: Part) -> int:
    """A padded bag's rows per bag (static)."""
    return int(part.lookups.shape[1]) if len(part.lookups.shape) > 1 else 1


def _padded_bag(ctx: _Ctx, spec: ClusterSpec, part: Part, table: Value, ids: Value,
                w: Value | None, out: Value) -> None:
    e = ctx.e
    _, d, s_n, s_d = _dims(ctx, table)
    nb = e.dim(out, 0, "B")
    p = e.dim(ids, 1, "P") if len(part.lookups.shape) > 1 else e.const(1, INDEX, "P")
    block = scratch(e, spec.sum_order, d) if spec.sum_order in PARTIALS else None
    bags = e.slc_for(ctx.s0, e.stream(nb), ctx.s1, "b")
    with e.into(bags.body):
        b = bags.iv
        _begin_row(ctx, spec, out, b, d, block)
        lookups = e.slc_for(ctx.s0, e.stream(p), ctx.s1, "p")
        with e.into(lookups.body):
            natural = (part.out.shape[0], part.lookups.shape[1] if len(part.lookups.shape) > 1
                       else 1)
            at = [b, lookups.iv]
            raw = e.mem(ids, coords(e, ids, part.lookups.shape, natural, at, ctx.s0))
            ws = (e.mem(w, coords(e, w, part.weights.shape, natural, at, ctx.s0))
                  if w is not None else None)
            _lookup_body(ctx, spec, part, table, raw, ws, out, b, s_n, s_d, d,
                         partial=None if block is None else (block, lookups.iv))
            if block is not None:
                fold_callback(e, spec.sum_order, block, out, b, lookups.iv, _width(part), d,
                              ctx.c0, ctx.c1)
            e.end(slc.YieldOp, lookups.body)
        _end_bag(ctx, spec, out, b, d, lambda: p)
        e.end(slc.YieldOp, bags.body)


def _segment_reduce(ctx: _Ctx, spec: ClusterSpec, part: Part, table: Value, indices: Value,
                    seg: Value, w: Value | None,
                    outs: list[tuple[ClusterSpec, Value]]) -> None:
    """One pass over the lookups into each of ``outs`` (spec of its reduction, result)."""
    e = ctx.e
    _, d, s_n, s_d = _dims(ctx, table)
    s = e.dim(outs[0][1], 0, "S")
    s_s = e.stream(s)
    averaged = [(sp, o) for sp, o in outs if sp.combiner in ("mean", "sqrt_n")]
    counts = e.v(memref.AllocOp, [s], MemRefType((None,), I64), "counts") if averaged else None
    rows = e.slc_for(ctx.s0, s_s, ctx.s1, "r")  # init: the start value of every row
    with e.into(rows.body):
        cb = e.callback()
        with e.into(cb.body):
            r = e.read(rows.iv)
            for sp, out in outs:
                o = out.type.elem
                fill_row(e, out, r, d, e.const(start_value(sp, o), o), ctx.c0, ctx.c1)
            if counts is not None:
                e.op(memref.StoreOp, [e.const(0, I64), counts, r])
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)
    lk = part.lookups.shape
    lookups = e.slc_for(ctx.s0, e.stream(e.dim(indices, 0, "L")), ctx.s1, "j")
    with e.into(lookups.body):
        j = lookups.iv
        raw = e.mem(indices, coords(e, indices, lk, lk[:1], [j], ctx.s0))
        sid = e.mem(seg, coords(e, seg, part.layout.shape, lk[:1], [j], ctx.s0))
        keep = e.alu("inrange", [sid, s_s], I1)
        ws = (e.mem(w, coords(e, w, part.weights.shape, lk[:1], [j], ctx.s0))
              if w is not None else None)
        if counts is not None:  # begin of the row loop: count the lookup into its segment
            cb = e.callback()
            with e.into(cb.body):
                cond = e.scf_if(e.read(keep))
                with e.into(cond.then_block):
                    sv = e.read(sid)
                    one = e.const(1, I64)
                    old = e.v(memref.LoadOp, [counts, sv], I64)
                    e.op(memref.StoreOp, [e.v(arith.AddIOp, [old, one], I64), counts, sv])
                    e.end(scf.YieldOp, cond.then_block)
                e.end(slc.YieldOp, cb.body)
        (sp0, out0), *more = outs
        _lookup_body(ctx, sp0, part, table, raw, ws, out0, sid, s_n, s_d, d, guard=keep,
                     more=tuple(more))
        e.end(slc.YieldOp, lookups.body)
    if counts is not None:
        fin = e.slc_for(ctx.s0, s_s, ctx.s1, "r")
        with e.into(fin.body):
            cb = e.callback()
            with e.into(cb.body):
                r = e.read(fin.iv)
                cnt = e.v(memref.LoadOp, [counts, r], I64)
                for sp, out in averaged:
                    finish_row(e, sp, out, r, cnt, d, ctx.c0, ctx.c1)
                e.end(slc.YieldOp, cb.body)
            e.end(slc.YieldOp, fin.body)
