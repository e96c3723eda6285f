"""Lower the backward of a row lookup to SLC: ``ember.scatter_grad`` (the dense gradient) and
``ember.sparse_sgd`` (that gradient fused with an SGD update of the touched rows).

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

``sparse_sgd`` (``t + g * s``, contracted by XLA to ``fma(g, s, t)``) must sum a row's
duplicate updates before applying them: the gradient is accumulated as above into a core
scratch ``[V, D]`` (``memref.alloc``, zeroed first), then one pass over the rows writes
``out[r] = fma(grad[r], s, table[r])``. A DAE program's results are buffers of their own (the
format has no operand aliasing), so every row of the result is written anyway; for a row
without gradient that is ``fma(0, s, t)``, which is ``t`` when ``s`` is finite and negative
and XLA's dense value otherwise, so no run-time test is needed."""

from __future__ import annotations

from ember_xla.call_specs import ClusterSpec, LoweringRefused
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.lower.emit import Emitter, fill_row
from ember_xla.ir.types import F32, I1, MemRefType
from ember_xla.ir.value import Value


def lower_backward(e: Emitter, spec: ClusterSpec, args: list[Value], out: Value,
                   consts: tuple[Value, Value, Value, Value]) -> None:
    """Append the lowering of one backward cluster; ``args`` are the operand memrefs in
    ``spec.roles`` order, ``consts`` the index constants 0 and 1 and their streams."""
    role = dict(zip(spec.roles, args, strict=True))
    c0, c1, s0, s1 = consts
    v = e.dim(out, 0, "V")
    d = e.dim(out, 1, "D")
    s_v = e.stream(v)
    if spec.kind == "scatter_grad":
        _zero_rows(e, out, s_v, d, s0, s1, c0, c1)
        _scatter(e, role, out, s_v, d, s0, s1)
    elif spec.kind == "sparse_sgd":
        grad = e.v(memref.AllocOp, [v, d], MemRefType((None, None), F32), "grad")
        _zero_rows(e, grad, s_v, d, s0, s1, c0, c1)
        _scatter(e, role, grad, s_v, d, s0, s1)
        _sgd_rows(e, role, grad, out, s_v, d, s0, s1, c0, c1)
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


def _scatter(e: Emitter, role: dict[str, Value], out: Value, s_v: Value, d: Value,
             s0: Value, s1: Value) -> None:
    """``for j``: the row written (dropped when out of range), the gradient row read, and one
    read-modify-write callback per element into ``out[row, k]``."""
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
                    new = e.v(arith.AddFOp, [old, e.read(val)], o)
                    e.op(memref.StoreOp, [new, out, r, c])
                    e.end(scf.YieldOp, guard.then_block)
                e.end(slc.YieldOp, cb.body)
            e.end(slc.YieldOp, inner.body)
        e.end(slc.YieldOp, lookups.body)


def _sgd_row(e: Emitter, grad: Value, out: Value, table: Value, scale: Value, r: Value,
             d: Value, c0: Value, c1: Value) -> None:
    """``out[r, :] = fma(grad[r, :], scale, table[r, :])`` (core loop over the row)."""
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        g = e.v(memref.LoadOp, [grad, r, loop.iv], F32)
        t = e.v(memref.LoadOp, [table, r, loop.iv], F32)
        e.op(memref.StoreOp, [e.v(arith.FmaOp, [g, scale, t], F32), out, r, loop.iv])
        e.end(scf.YieldOp, loop.body)


def _sgd_rows(e: Emitter, role: dict[str, Value], grad: Value, out: Value, s_v: Value,
              d: Value, s0: Value, s1: Value, c0: Value, c1: Value) -> None:
    """``for r in [0, V)``: one callback per row writing ``out[r, :] = fma(grad[r, :], s,
    table[r, :])``, ``s`` loaded once per row."""
    rows = e.slc_for(s0, s_v, s1, "r")
    with e.into(rows.body):
        cb = e.callback()
        with e.into(cb.body):
            scale = e.v(memref.LoadOp, [role["scale"]], F32)
            _sgd_row(e, grad, out, role["table"], scale, e.read(rows.iv), d, c0, c1)
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)


__all__ = ["lower_backward"]
