"""Lower the fused Adagrad updates to SLC: ``ember.sparse_adagrad`` (optax's element-wise
Adagrad) and ``ember.sparse_rowwise_adagrad`` (one accumulator per row), each a lookup's
gradient summed per touched row in XLA's order (``to_slc_grad.scatter_rows``) and the update
applied to the touched rows of the table and its accumulator in place (both results start as
their operands: ``output_init``). The execute unit's arithmetic is the native kernels'
(native/sparse_optimizer.cc, rowwise_adagrad.cc), operation for operation:

- ``sparse_adagrad``, per element: ``acc = fma(g, g, a)``; ``x = acc + eps``; XLA:CPU's rsqrt
  of ``x``: the estimate ``rsqrte`` refined by Newton-Raphson steps (``r2 = x * r``,
  ``h = fma(r2, r, -1)``, ``r = fma(r * -0.5, h, r)``; as many as XLA takes on this CPU,
  ``native.rsqrt_probe.xla_rsqrt_steps``), the estimate kept for ``x < FLT_MIN`` and
  ``x == inf``; ``u = (acc > 0 ? rsqrt : 0) * g``; ``t = fma(u, s, t)``. Untouched rows: as
  ``sparse_sgd`` (a core test gives the row passes' bound, 0 or V), with the kernel's rule
  ``s`` finite with its sign bit set and ``eps >= 0``; where that rule keeps them, a pass
  over the untouched rows still stores ``fma(0, 0, a)`` over each zero of their accumulators
  (a -0 becomes +0, as in XLA's dense update).
- ``sparse_adagrad_keras`` (Keras 3's Adagrad), per element: ``acc = fma(g, g, a)``; XLA's
  rsqrt of ``acc + eps`` as above; ``t = fma(-(lr * g), rsqrt, t)`` (where ``lr * g`` is NaN,
  ``fma(lr * g, -rsqrt, t)``: the kernel's fnmadd keeps a NaN operand's sign). Untouched rows:
  a pass over all V rows (the accumulator read by the execute unit) updates a row with
  ``g = 0`` unless ``lr`` is finite with its sign bit clear and no element of the row's
  accumulator is -0 or has ``a + eps`` not > 0 (the kernel's ``FirstKerasChanged``).
- ``sparse_rowwise_adagrad``, per row: ``m`` the sum of ``g * g`` over the row in the call's
  ``sum_order`` (``blocked16``: YNNPACK's 16 lanes, each summing every 16th square of a
  64-element block from zero, the blocks added per lane, then the lanes halved 8, 4, 2, 1;
  ``sequential``: one after the other), ``acc = fma(m, 1/D, a)`` for a power-of-two D else
  ``a + m / D``, ``inv = 1 / (sqrt(acc) + eps)``, then ``t = fma(-g, inv * lr, t)``
  (``lr_folded``) or ``fma(-(lr * g), inv, t)``. An untouched row keeps its bits when ``lr``
  is finite with its sign bit clear and the row's accumulator is not NaN, has its sign bit
  clear and ``1 / (sqrt(a) + eps)`` (times lr when folded) is finite with ``sqrt(a) + eps >
  0``; otherwise it gets the update with ``g = 0``: a pass over all V rows, the accumulator
  streamed by the access unit, tests each untouched row (as the kernel does)."""

from __future__ import annotations

import numpy as np

from ember_xla.call_specs import ClusterSpec
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.lower.emit import Emitter
from ember_xla.dae_target.lower.to_slc_grad import (
    flag_not,
    fused_update_passes,
    per_row,
    rows_written_by_dense_update,
)
from ember_xla.ir.types import F32, I1, INDEX, MemRefType
from ember_xla.ir.value import Value

FLT_MIN = float(np.finfo(np.float32).tiny)


def lower_adagrad(
    e: Emitter,
    spec: ClusterSpec,
    role: dict[str, Value],
    outs: list[Value],
    consts: tuple[Value, Value, Value, Value],
) -> None:
    """Append the lowering of a fused Adagrad update (``outs``: the table, the accumulator)."""
    c0, c1, s0, s1 = consts
    out_t = outs[0]
    v = e.dim(out_t, 0, "V")
    d = e.dim(out_t, 1, "D")
    s_v = e.stream(v)
    grad = e.v(memref.AllocOp, [v, d], MemRefType((None, None), F32), "grad")
    done = e.v(memref.AllocOp, [v], MemRefType((None,), I1), "done")
    no, yes = e.const(False, I1), e.const(True, I1)
    rowwise = spec.kind == "sparse_rowwise_adagrad"
    keras = spec.kind == "sparse_adagrad_keras"
    lanes = (
        e.v(memref.AllocOp, [], MemRefType((16,), F32), "lanes")
        if rowwise and spec.sum_order == "blocked16"
        else None
    )

    def row(grad_or_none: Value | None, r: Value) -> None:
        if rowwise:
            _rowwise_row(e, spec, role, outs, grad_or_none, lanes, r, d, c0, c1)
        else:
            _adagrad_row(e, role, outs, grad_or_none, r, d, c0, c1, keras)

    # rowwise: every row's flag (the untouched-row pass below reads them all); else the rows
    # the dense update changes, cleared and then updated by the shared passes
    per_row_rule = rowwise or keras
    n_dense = None if per_row_rule else rows_written_by_dense_update(e, role, v, c0)
    s_rows = s_v if n_dense is None else e.stream(n_dense)
    fused_update_passes(e, role, grad, done, (no, yes), s_v, d, consts, row, s_rows,
                        None if per_row_rule else s_rows)
    if keras:
        per_row(e, s_v, s0, s1,
                lambda r: _untouched_keras(e, role, done, r, d, c0, c1, lambda: row(None, r)))
    elif n_dense is None:
        _untouched_rowwise(e, spec, role, done, s_v, s0, s1, lambda r: row(None, r))
    else:  # where the rule keeps untouched rows (n_dense 0), their accumulators' -0 still change
        n_kept = e.v(arith.SubIOp, [v, n_dense], v.type, "n_kept")
        per_row(e, e.stream(n_kept), s0, s1,
                lambda r: _untouched_zeros(e, role, outs[1], done, r, d, c0, c1))


def xla_rsqrt(e: Emitter, x: Value) -> Value:
    """XLA:CPU's f32 rsqrt of ``x`` (native/xla_rsqrt.h): the estimate, refined by the
    Newton-Raphson steps XLA takes on this CPU, the estimate kept for tiny and infinite x."""
    from ember_xla.native.rsqrt_probe import xla_rsqrt_steps

    guess = e.v(arith.RsqrtEOp, [x], F32)
    r = guess
    half, minus_one = e.const(-0.5, F32), e.const(-1.0, F32)
    for _ in range(xla_rsqrt_steps()):
        r2 = e.v(arith.MulFOp, [x, r], F32)
        half_r = e.v(arith.MulFOp, [r, half], F32)
        h = e.v(arith.FmaOp, [r2, r, minus_one], F32)
        r = e.v(arith.FmaOp, [half_r, h, r], F32)
    tiny = e.v(arith.CmpFOp, [x, e.const(FLT_MIN, F32)], I1, pred="olt")
    inf = e.v(arith.CmpFOp, [x, e.const(float("inf"), F32)], I1, pred="oeq")
    keep = e.v(arith.OrIOp, [tiny, inf], I1)
    return e.v(arith.SelectOp, [keep, guess, r], F32)


def _adagrad_row(
    e: Emitter,
    role: dict[str, Value],
    outs: list[Value],
    grad: Value | None,
    r: Value,
    d: Value,
    c0: Value,
    c1: Value,
    keras: bool = False,
) -> None:
    """Element-wise Adagrad of row ``r`` (``g`` = ``grad[r, :]``, or +0 when None): optax's,
    or with ``keras`` Keras 3's (``scale`` is then ``lr``)."""
    s = e.v(memref.LoadOp, [role["scale"]], F32)
    eps = e.v(memref.LoadOp, [role["eps"]], F32)
    zero = e.const(0.0, F32)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        k = loop.iv
        g = e.v(memref.LoadOp, [grad, r, k], F32) if grad is not None else zero
        a = e.v(memref.LoadOp, [role["accumulator"], r, k], F32)
        acc = e.v(arith.FmaOp, [g, g, a], F32)
        rs = xla_rsqrt(e, e.v(arith.AddFOp, [acc, eps], F32))
        t = e.v(memref.LoadOp, [role["table"], r, k], F32)
        if keras:  # fma(-(lr * g), rs, t); a NaN lr * g keeps its sign (the kernel's fnmadd)
            step = e.v(arith.MulFOp, [s, g], F32)
            plain = e.v(arith.FmaOp, [e.v(arith.NegFOp, [step], F32), rs, t], F32)
            nan_step = e.v(arith.FmaOp, [step, e.v(arith.NegFOp, [rs], F32), t], F32)
            is_nan = e.v(arith.CmpFOp, [step, step], I1, pred="uno")
            new = e.v(arith.SelectOp, [is_nan, nan_step, plain], F32)
        else:  # fma((acc > 0 ? rs : 0) * g, s, t)
            pos = e.v(arith.CmpFOp, [acc, zero], I1, pred="ogt")
            u = e.v(arith.MulFOp, [e.v(arith.SelectOp, [pos, rs, zero], F32), g], F32)
            new = e.v(arith.FmaOp, [u, s, t], F32)
        e.op(memref.StoreOp, [new, outs[0], r, k])
        e.op(memref.StoreOp, [acc, outs[1], r, k])
        e.end(scf.YieldOp, loop.body)


def _untouched_keras(e: Emitter, role: dict[str, Value], done: Value, r: Value, d: Value,
                     c0: Value, c1: Value, update: object) -> None:
    """An untouched row ``r`` is updated with ``g = 0`` unless ``lr`` is finite with its sign
    bit clear and every accumulator element of the row has its sign bit clear (no -0) with
    ``a + eps > 0``."""
    with e.then(flag_not(e, e.v(memref.LoadOp, [done, r], I1))):
        lr = e.v(memref.LoadOp, [role["scale"]], F32)
        eps = e.v(memref.LoadOp, [role["eps"]], F32)
        zero = e.const(0.0, F32)
        kept0 = e.v(arith.AndIOp, [_finite(e, lr), _sign_clear(e, lr)], I1)
        loop = scf.ForOp.build(c0, d, c1, [kept0])
        e.block.append(loop)
        with e.into(loop.body):
            a = e.v(memref.LoadOp, [role["accumulator"], r, loop.body.args[0]], F32)
            pos = e.v(arith.CmpFOp, [e.v(arith.AddFOp, [a, eps], F32), zero], I1, pred="ogt")
            # a -0 fails (g * g + a is +0); a NaN fails the sum's test already
            is_zero = e.v(arith.CmpFOp, [a, zero], I1, pred="oeq")
            minus = e.v(arith.AndIOp, [is_zero, flag_not(e, _sign_clear(e, a))], I1)
            ok = e.v(arith.AndIOp, [pos, flag_not(e, minus)], I1)
            e.op(scf.YieldOp, [e.v(arith.AndIOp, [loop.body.args[1], ok], I1)])
        with e.then(flag_not(e, loop.results[0])):
            update()  # type: ignore[operator]


def _untouched_zeros(e: Emitter, role: dict[str, Value], out_acc: Value, done: Value,
                     r: Value, d: Value, c0: Value, c1: Value) -> None:
    """An untouched row ``r`` whose table the update keeps: ``g * g + a`` with ``g = 0``
    still turns an accumulator's -0 into +0 (the kernel's ``FirstWithNegativeZero`` rows), so
    every zero of the row is stored as ``fma(0, 0, a)`` (+0; the same bits for a +0)."""
    with e.then(flag_not(e, e.v(memref.LoadOp, [done, r], I1))):
        zero = e.const(0.0, F32)
        loop = e.scf_for(c0, d, c1)
        with e.into(loop.body):
            a = e.v(memref.LoadOp, [role["accumulator"], r, loop.iv], F32)
            with e.then(e.v(arith.CmpFOp, [a, zero], I1, pred="oeq")):
                e.op(memref.StoreOp, [e.v(arith.FmaOp, [zero, zero, a], F32), out_acc, r,
                                      loop.iv])
            e.end(scf.YieldOp, loop.body)


def _sum_squares(
    e: Emitter,
    spec: ClusterSpec,
    grad: Value,
    lanes: Value | None,
    r: Value,
    d: Value,
    c0: Value,
    c1: Value,
) -> Value:
    """sum(g * g) over row ``r`` of ``grad`` in the call's ``sum_order`` (each square
    rounded, then each add)."""
    zero = e.const(0.0, F32)

    def squares(lb: Value, ub: Value, step: Value, lane: Value) -> Value:
        """``0 + g[lb + lane]^2 + g[lb + step + lane]^2 + ...`` below ``ub + lane``."""
        loop = scf.ForOp.build(lb, ub, step, [zero])
        e.block.append(loop)
        with e.into(loop.body):
            j = e.v(arith.AddIOp, [loop.body.args[0], lane], INDEX)
            x = e.v(memref.LoadOp, [grad, r, j], F32)
            acc = e.v(arith.AddFOp, [loop.body.args[1], e.v(arith.MulFOp, [x, x], F32)], F32)
            e.op(scf.YieldOp, [acc])
        return loop.results[0]

    if lanes is None:  # sequential
        return squares(c0, d, c1, c0)
    c16, c64 = e.const(16, INDEX), e.const(64, INDEX)
    fill = e.scf_for(c0, c16, c1)
    with e.into(fill.body):
        e.op(memref.StoreOp, [zero, lanes, fill.iv])
        e.end(scf.YieldOp, fill.body)
    blocks = e.scf_for(c0, d, c64)
    with e.into(blocks.body):
        b = blocks.iv
        end = e.v(arith.MinSIOp, [e.v(arith.AddIOp, [b, c64], INDEX), d], INDEX)
        per_lane = e.scf_for(c0, c16, c1)
        with e.into(per_lane.body):
            lane = per_lane.iv
            block_sum = squares(b, end, c16, lane)
            old = e.v(memref.LoadOp, [lanes, lane], F32)
            e.op(memref.StoreOp, [e.v(arith.AddFOp, [old, block_sum], F32), lanes, lane])
            e.end(scf.YieldOp, per_lane.body)
        e.end(scf.YieldOp, blocks.body)
    for half in (8, 4, 2):  # the lanes halved: l + (l + half)
        c_half = e.const(half, INDEX)
        fold = e.scf_for(c0, c_half, c1)
        with e.into(fold.body):
            lo = e.v(memref.LoadOp, [lanes, fold.iv], F32)
            hi = e.v(memref.LoadOp, [lanes, e.v(arith.AddIOp, [fold.iv, c_half], INDEX)], F32)
            e.op(memref.StoreOp, [e.v(arith.AddFOp, [lo, hi], F32), lanes, fold.iv])
            e.end(scf.YieldOp, fold.body)
    first = e.v(memref.LoadOp, [lanes, c0], F32)
    return e.v(arith.AddFOp, [first, e.v(memref.LoadOp, [lanes, c1], F32)], F32)


def _rowwise_row(
    e: Emitter,
    spec: ClusterSpec,
    role: dict[str, Value],
    outs: list[Value],
    grad: Value | None,
    lanes: Value | None,
    r: Value,
    d: Value,
    c0: Value,
    c1: Value,
) -> None:
    """Row-wise Adagrad of row ``r`` (``g`` = ``grad[r, :]``, or +0 when None)."""
    width = int(spec.outputs[0].shape[1])
    zero = e.const(0.0, F32)
    lr = e.v(memref.LoadOp, [role["scale"]], F32)
    eps = e.v(memref.LoadOp, [role["eps"]], F32)
    m = _sum_squares(e, spec, grad, lanes, r, d, c0, c1) if grad is not None else zero
    a = e.v(memref.LoadOp, [role["accumulator"], r], F32)
    if width & (width - 1) == 0:  # XLA: a multiply by 1/D contracted with the add
        inv_d = float(np.float32(1.0) / np.float32(width))
        acc = e.v(arith.FmaOp, [m, e.const(inv_d, F32), a], F32)
    else:
        acc = e.v(arith.AddFOp, [a, e.v(arith.DivFOp, [m, e.const(float(width), F32)], F32)], F32)
    den = e.v(arith.AddFOp, [e.v(arith.SqrtOp, [acc], F32), eps], F32)
    inv = e.v(arith.DivFOp, [e.const(1.0, F32), den], F32)
    factor = e.v(arith.MulFOp, [inv, lr], F32) if spec.lr_folded else inv
    neg_factor = e.v(arith.NegFOp, [factor], F32)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        k = loop.iv
        g = e.v(memref.LoadOp, [grad, r, k], F32) if grad is not None else zero
        step = g if spec.lr_folded else e.v(arith.MulFOp, [lr, g], F32)
        t = e.v(memref.LoadOp, [role["table"], r, k], F32)
        # t - step * factor, rounded once (the kernel's fnmadd): fma(-step, factor, t), or
        # fma(step, -factor, t) where step is NaN (the same value; fnmadd passes a NaN
        # operand on unnegated, so the NaN's sign is step's, as the kernel's)
        plain = e.v(arith.FmaOp, [e.v(arith.NegFOp, [step], F32), factor, t], F32)
        nan_step = e.v(arith.FmaOp, [step, neg_factor, t], F32)
        is_nan = e.v(arith.CmpFOp, [step, step], I1, pred="uno")
        new = e.v(arith.SelectOp, [is_nan, nan_step, plain], F32)
        e.op(memref.StoreOp, [new, outs[0], r, k])
        e.end(scf.YieldOp, loop.body)
    e.op(memref.StoreOp, [acc, outs[1], r])


def _finite(e: Emitter, x: Value) -> Value:
    zero = e.const(0.0, F32)
    return e.v(arith.CmpFOp, [e.v(arith.SubFOp, [x, x], F32), zero], I1, pred="oeq")


def _sign_clear(e: Emitter, x: Value) -> Value:
    """``x`` is not NaN and its sign bit is clear: ``x > 0``, or ``x == 0`` and ``1/x > 0``."""
    zero, one = e.const(0.0, F32), e.const(1.0, F32)
    pos = e.v(arith.CmpFOp, [x, zero], I1, pred="ogt")
    is_zero = e.v(arith.CmpFOp, [x, zero], I1, pred="oeq")
    plus = e.v(arith.CmpFOp, [e.v(arith.DivFOp, [one, x], F32), zero], I1, pred="ogt")
    return e.v(arith.OrIOp, [pos, e.v(arith.AndIOp, [is_zero, plus], I1)], I1)


def _untouched_rowwise(
    e: Emitter,
    spec: ClusterSpec,
    role: dict[str, Value],
    done: Value,
    s_v: Value,
    s0: Value,
    s1: Value,
    update: object,
) -> None:
    """``for r in [0, V)``: the access unit streams ``accumulator[r]``; the callback updates
    the untouched row ``r`` with ``g = 0`` unless the update provably keeps it (the kernel's
    ``RowKept`` and ``lr`` finite with its sign bit clear)."""
    rows = e.slc_for(s0, s_v, s1, "r")
    with e.into(rows.body):
        s_a = e.mem(role["accumulator"], [rows.iv])
        cb = e.callback()
        with e.into(cb.body):
            r, a = e.read(rows.iv), e.read(s_a)
            lr = e.v(memref.LoadOp, [role["scale"]], F32)
            eps = e.v(memref.LoadOp, [role["eps"]], F32)
            den = e.v(arith.AddFOp, [e.v(arith.SqrtOp, [a], F32), eps], F32)
            inv = e.v(arith.DivFOp, [e.const(1.0, F32), den], F32)
            kept = e.v(arith.AndIOp, [_sign_clear(e, a), _finite(e, inv)], I1)
            den_pos = e.v(arith.CmpFOp, [den, e.const(0.0, F32)], I1, pred="ogt")
            kept = e.v(arith.AndIOp, [kept, den_pos], I1)
            if spec.lr_folded:
                folded = _finite(e, e.v(arith.MulFOp, [inv, lr], F32))
                kept = e.v(arith.AndIOp, [kept, folded], I1)
            lr_kept = e.v(arith.AndIOp, [_finite(e, lr), _sign_clear(e, lr)], I1)
            kept = e.v(arith.AndIOp, [kept, lr_kept], I1)
            untouched = flag_not(e, e.v(memref.LoadOp, [done, r], I1))
            with e.then(e.v(arith.AndIOp, [untouched, flag_not(e, kept)], I1)):
                update(r)  # type: ignore[operator]
            e.end(slc.YieldOp, cb.body)
        e.end(slc.YieldOp, rows.body)


__all__ = ["lower_adagrad", "xla_rsqrt"]
