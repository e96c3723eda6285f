"""Lower the backward of a row lookup to SLC: ``ember.scatter_grad`` (the dense gradient),
``ember.sparse_sgd`` (that gradient fused with an SGD update of the touched rows) and
``ember.ordered_scatter`` (a TF/Keras sparse apply: the update rows added to or subtracted
from the variable's rows one after the other, in place); the fused Adagrad updates are in
``to_slc_adagrad.py`` on the same building blocks.

The gradient is a scatter-add, ``out[indices[j], :] += rows[j, :]`` with ``rows[j]`` the
update row ``updates[j]`` (or, gathered form, ``source[clamp(source_rows[j])]``, skipped where
``mask[j]`` is false) and indices outside ``[0, V)`` dropped. On the DAE machine:

- the access unit streams ``j`` over the updates, the index (the row written), its in-range
  flag, the source row and the mask, then the gradient row ``rows[j, k]`` for ``k in [0, D)``;
- the execute unit adds each element into ``out[indices[j], k]``: an explicit
  read-modify-write (``memref.load`` / ``arith.addf`` / ``memref.store``) of the output row.
  Ordering rule: the execute unit pops callbacks in stream order, so the updates of one row
  (duplicate ids) are added in index order, ``((0 + u_i1) + u_i2) + ...``, exactly XLA's
  serial scatter; a later update of a row reads what the earlier one stored.

Before the updates an init loop zeroes the ``V`` rows (the gradient is a dense ``[V, D]``
result, as XLA's).

``sparse_sgd`` (``t + g * s``, contracted by XLA to ``fma(g, s, t)``) updates the table in
place: its result starts as the table (the function's ``output_init``, the DAE program's
``init`` record), and only touched rows are read and written, in four passes over the ids
(all on the access unit's index stream; the core keeps a scratch gradient row and a
``done[V]`` flag per row, both ``memref.alloc``, touched only at touched rows):

1. per in-range id: zero its scratch gradient row, clear its flag;
2. the scatter-add above into the scratch rows (a row's duplicates in index order);
3. per in-range id: the first time a row comes up (flag clear) set the flag and write
   ``out[r] = fma(grad[r], s, table[r])``: the read-modify-write hazard of duplicate ids on
   a table updated in place is the flag test, so each touched row is updated exactly once;
4. rows without gradient are left as they are when ``t + 0 * s == t`` for every ``t`` (``s``
   finite with its sign bit set, tested once on the core before the engines); otherwise
   (lr <= 0, Inf, NaN: XLA's dense update changes them) a pass over all ``V`` rows, before 1
   clearing every flag and after 3 writing ``fma(0, s, t)`` where the flag is clear. Its
   loops' bound is that test's result (0 or V), so the sparse case runs no row pass.

``ordered_scatter`` is the scatter alone into its result, which starts as the operand
(``output_init``): ``out[id] = out[id] -/+ u_j`` for each update in index order, exactly XLA's
serial scatter into the variable (ids outside ``[0, V)`` dropped)."""

from __future__ import annotations

from ember_xla.call_specs import ClusterSpec, LoweringRefused
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.lower.emit import Emitter, fill_row
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.types import F32, I1, MemRefType
from ember_xla.ir.value import Value


def lower_backward(e: Emitter, spec: ClusterSpec, args: list[Value], outs: list[Value],
                   consts: tuple[Value, Value, Value, Value]) -> None:
    """Append the lowering of one backward cluster; ``args`` are the operand memrefs in
    ``spec.roles`` order, ``outs`` the results, ``consts`` the index constants 0 and 1 and
    their streams."""
    role = dict(zip(spec.roles, args, strict=True))
    c0, c1, s0, s1 = consts
    out = outs[0]
    v = e.dim(out, 0, "V")
    d = e.dim(out, 1, "D")
    s_v = e.stream(v)
    if spec.kind == "scatter_grad":
        _zero_rows(e, out, s_v, d, s0, s1, c0, c1)
        scatter_rows(e, role, out, s_v, d, s0, s1)
    elif spec.kind == "ordered_scatter":
        scatter_rows(e, role, out, s_v, d, s0, s1,
                     arith.SubFOp if spec.combiner == "subtract" else arith.AddFOp)
    elif spec.kind == "sparse_sgd":
        _sparse_sgd(e, role, out, v, d, s_v, consts)
    else:
        raise LoweringRefused(f"{spec.name}: {spec.kind} has no DAE lowering")


def _zero_rows(e: Emitter, out: Value, s_v: Value, d: Value, s0: Value, s1: Value, c0: Value,
               c1: Value) -> None:
    """``for r in [0, V)``: a callback writing ``out[r, :] = +0``."""
    rows = e.slc_for(s0, s_v, s1, "r")
    with e.into(rows.body):
        cb = e.callback()
        with e.into(cb.body):
            r = e.read(rows.iv)
            fill_row(e, out, r, d, e.const(0.0, out.type.elem), c0, c1)
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)


def scatter_rows(e: Emitter, role: dict[str, Value], out: Value, s_v: Value, d: Value,
                 s0: Value, s1: Value, combine: type[OpDef] = arith.AddFOp) -> None:
    """``for j``: the row written (dropped when out of range), the gradient row read, and one
    read-modify-write callback per element: ``out[row, k] = combine(out[row, k], u)``."""
    indices = role["indices"]
    rows = role.get("source", role.get("updates"))
    s_s = e.stream(e.dim(rows, 0, "S")) if "source_rows" in role else None
    s_d = e.stream(d)
    lookups = e.slc_for(s0, e.stream(e.dim(indices, 0, "L")), s1, "j")
    with e.into(lookups.body):
        j = lookups.iv
        sid = e.mem(indices, [j])
        keep = e.alu("inrange", [sid, s_v], I1)
        src = j
        if s_s is not None:  # XLA's row gather clamps its start index
            src = e.alu("clamp", [e.mem(role["source_rows"], [j]), s_s])
        mask = e.mem(role["mask"], [j]) if "mask" in role else None
        inner = e.slc_for(s0, s_d, s1, "k")
        with e.into(inner.body):
            val = e.mem(rows, [src, inner.iv])
            cb = e.callback()
            with e.into(cb.body):
                cond = e.read(keep)
                if mask is not None:
                    cond = e.v(arith.AndIOp, [cond, e.read(mask)], I1)
                guard = e.scf_if(cond)
                with e.into(guard.then_block):
                    r, c = e.read(sid), e.read(inner.iv)
                    o = out.type.elem
                    old = e.v(memref.LoadOp, [out, r, c], o)
                    new = e.v(combine, [old, e.read(val)], o)
                    e.op(memref.StoreOp, [new, out, r, c])
                    e.end(scf.YieldOp, guard.then_block)
                e.end(slc.YieldOp, cb.body)
            e.end(slc.YieldOp, inner.body)
        e.end(slc.YieldOp, lookups.body)


def _sgd_row(e: Emitter, grad: Value | None, out: Value, table: Value, scale: Value, r: Value,
             d: Value, c0: Value, c1: Value) -> None:
    """``out[r, :] = fma(g, scale, table[r, :])``, g = ``grad[r, :]`` or +0 (``grad`` None)
    (core loop over the row)."""
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        g = (e.v(memref.LoadOp, [grad, r, loop.iv], F32) if grad is not None
             else e.const(0.0, F32))
        t = e.v(memref.LoadOp, [table, r, loop.iv], F32)
        e.op(memref.StoreOp, [e.v(arith.FmaOp, [g, scale, t], F32), out, r, loop.iv])
        e.end(scf.YieldOp, loop.body)


def rows_written_by_dense_update(e: Emitter, role: dict[str, Value], v: Value,
                                 c0: Value) -> Value:
    """Core, before the engines: 0 when ``t + 0 * s == t`` for every t (``s`` finite with its
    sign bit set: ``s - s == 0`` and ``1 / s < 0``; with an ``eps`` operand, the Adagrad
    kernel's rule, also ``eps >= 0``), else V (every untouched row is updated with a zero
    gradient, as XLA's dense update does)."""
    s = e.v(memref.LoadOp, [role["scale"]], F32, "s")
    zero, one = e.const(0.0, F32), e.const(1.0, F32)
    finite = e.v(arith.CmpFOp, [e.v(arith.SubFOp, [s, s], F32), zero], I1, pred="oeq")
    negative = e.v(arith.CmpFOp, [e.v(arith.DivFOp, [one, s], F32), zero], I1, pred="olt")
    exact = e.v(arith.AndIOp, [finite, negative], I1)
    if "eps" in role:
        eps = e.v(memref.LoadOp, [role["eps"]], F32, "eps")
        eps_ok = e.v(arith.CmpFOp, [eps, zero], I1, pred="oge")
        exact = e.v(arith.AndIOp, [exact, eps_ok], I1)
    return e.v(arith.SelectOp, [exact, c0, v], v.type, "n_dense")


def per_id(e: Emitter, role: dict[str, Value], s_v: Value, s0: Value, s1: Value,
            body: object) -> None:
    """``for j``: the id ``indices[j]`` and its in-range flag; one callback per id running
    ``body(row)`` when the id is in range."""
    indices = role["indices"]
    lookups = e.slc_for(s0, e.stream(e.dim(indices, 0, "L")), s1, "j")
    with e.into(lookups.body):
        sid = e.mem(indices, [lookups.iv])
        keep = e.alu("inrange", [sid, s_v], I1)
        cb = e.callback()
        with e.into(cb.body):
            guard = e.scf_if(e.read(keep))
            with e.into(guard.then_block):
                body(e.read(sid))  # type: ignore[operator]
                e.end(scf.YieldOp, guard.then_block)
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, lookups.body)


def per_row(e: Emitter, s_n: Value, s0: Value, s1: Value, body: object) -> None:
    """``for r in [0, n)``: one callback per row running ``body(r)``."""
    rows = e.slc_for(s0, s_n, s1, "r")
    with e.into(rows.body):
        cb = e.callback()
        with e.into(cb.body):
            body(e.read(rows.iv))  # type: ignore[operator]
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)


def flag_not(e: Emitter, x: Value) -> Value:
    return e.v(arith.XOrIOp, [x, e.const(True, I1)], I1)


def _sparse_sgd(e: Emitter, role: dict[str, Value], out: Value, v: Value, d: Value,
                s_v: Value, consts: tuple[Value, Value, Value, Value]) -> None:
    """The fused SGD update in place (``out`` starts as the table: ``output_init``)."""
    c0, c1, _, _ = consts
    table = role["table"]
    grad = e.v(memref.AllocOp, [v, d], MemRefType((None, None), F32), "grad")
    done = e.v(memref.AllocOp, [v], MemRefType((None,), I1), "done")
    s_dense = e.stream(rows_written_by_dense_update(e, role, v, c0))
    flags = (e.const(False, I1), e.const(True, I1))

    def row(g: Value | None, r: Value) -> None:
        _sgd_row(e, g, out, table, e.v(memref.LoadOp, [role["scale"]], F32), r, d, c0, c1)

    fused_update_passes(e, role, grad, done, flags, s_v, d, consts, row, s_dense, s_dense)


def fused_update_passes(e: Emitter, role: dict[str, Value], grad: Value, done: Value,
                        flags: tuple[Value, Value], s_v: Value, d: Value,
                        consts: tuple[Value, Value, Value, Value], row: object,
                        s_clear: Value, s_untouched: Value | None) -> None:
    """The passes of a fused sparse update in place: clear the ``done`` flag of the rows in
    ``s_clear``; zero each touched row's gradient; scatter the gradient rows in XLA's order;
    run ``row(grad, r)`` once per touched row; then ``row(None, r)`` for every row of
    ``s_untouched`` left untouched (None: the caller handles the untouched rows). ``flags``:
    the constants false and true."""
    c0, c1, s0, s1 = consts
    no, yes = flags

    def clear(r: Value) -> None:
        e.op(memref.StoreOp, [no, done, r])

    def start(r: Value) -> None:
        fill_row(e, grad, r, d, e.const(0.0, F32), c0, c1)
        e.op(memref.StoreOp, [no, done, r])

    def update_once(r: Value) -> None:
        with e.then(flag_not(e, e.v(memref.LoadOp, [done, r], I1))):
            e.op(memref.StoreOp, [yes, done, r])
            row(grad, r)  # type: ignore[operator]

    def untouched(r: Value) -> None:
        with e.then(flag_not(e, e.v(memref.LoadOp, [done, r], I1))):
            row(None, r)  # type: ignore[operator]

    per_row(e, s_clear, s0, s1, clear)           # the flags the later passes read
    per_id(e, role, s_v, s0, s1, start)          # the touched rows' gradient and flag
    scatter_rows(e, role, grad, s_v, d, s0, s1)  # the gradient, in XLA's order
    per_id(e, role, s_v, s0, s1, update_once)    # each touched row updated once
    if s_untouched is not None:
        per_row(e, s_untouched, s0, s1, untouched)  # the untouched rows the update changes


__all__ = ["flag_not", "fused_update_passes", "lower_backward", "per_id", "per_row",
           "rows_written_by_dense_update", "scatter_rows"]
