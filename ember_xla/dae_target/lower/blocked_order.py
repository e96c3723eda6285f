"""A padded bag's rows added in XLA:CPU's blocked order (YNNPACK's reduce, the native kernel's
``sum_order = "blocked"``: ``native/blocked_sum.cc``), on the execute unit: every lookup's row
is added into a block sum; after rows ``p`` with ``p % 4 == 3`` the block sum is added into a
16-row sum, after ``p % 16 == 15`` that into a 256-row sum, after ``p % 256 == 255`` that into
the output row; the bag's last row folds all three; every partial sum starts from zero (so
``0 + x`` rounds as the kernel's). The three partial sums are rows 0, 1, 2 of a core buffer
``[3, D]`` zeroed at the start of each bag, the folds one callback after each lookup's row.
Weighted bags only for f16 tables and weights (each product rounded to f16, as the kernel)."""

from __future__ import annotations

from ember_xla.call_specs import ClusterSpec, LoweringRefused
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.lower.emit import Emitter, accumulate
from ember_xla.ir.types import F32, I1, INDEX, MemRefType
from ember_xla.ir.value import Value

#: (mask of p, partial sum folded, into): after row p with ``p & mask == mask`` (or the last)
FOLDS = ((3, 0, 1), (15, 1, 2), (255, 2, None))


def check_blocked(spec: ClusterSpec) -> None:
    """The forms the kernel sums in the blocked order (else ``LoweringRefused``)."""
    out = spec.outputs[0].dtype
    if spec.combiner not in ("sum", "mean") or out != "f32" or spec.init != 0.0:
        raise LoweringRefused(f"{spec.name}: a blocked-order bag of {spec.combiner} into {out} "
                              f"from {spec.init} is not one the kernel sums in that order")
    if spec.weighted and not (spec.parts[0].table.dtype == "f16"
                              and spec.parts[0].weights.dtype == "f16"):
        raise LoweringRefused(f"{spec.name}: a weighted blocked-order bag is lowered only for "
                              "f16 tables and weights (the kernel's rounded products)")


def scratch(e: Emitter, d: Value) -> Value:
    """The core buffer of the three partial sums, ``[3, D]`` f32."""
    return e.v(memref.AllocOp, [e.const(3, INDEX), d], MemRefType((None, None), F32),
               "partial")


def zero_partials(e: Emitter, part: Value, d: Value, c0: Value, c1: Value) -> None:
    """Inside a callback: rows 0..2 of ``part`` = 0."""
    zero = e.const(0.0, F32)
    for k in range(3):
        r = e.const(k, INDEX)
        loop = e.scf_for(c0, d, c1)
        with e.into(loop.body):
            e.op(memref.StoreOp, [zero, part, r, loop.iv])
            e.end(scf.YieldOp, loop.body)


def add_to_block(e: Emitter, part: Value, c: Value, value: Value) -> None:
    """Inside the per-element callback: ``part[0, c] += value``."""
    accumulate(e, part, e.const(0, INDEX), c, value, "sum")


def fold_callback(e: Emitter, part: Value, out: Value, row: Value, p: Value, n_p: Value,
                  d: Value, c0: Value, c1: Value) -> None:
    """The callback after lookup ``p`` (a stream) of a bag of ``n_p`` rows into ``out[row]``."""
    cb = e.callback()
    with e.into(cb.body):
        pv, r = e.read(p), e.read(row)
        one = e.const(1, INDEX)
        last = e.v(arith.CmpIOp, [e.v(arith.AddIOp, [pv, one], INDEX), n_p], I1, pred="eq")
        for mask, src, dst in FOLDS:
            m = e.const(mask, INDEX)
            hit = e.v(arith.CmpIOp, [e.v(arith.AndIOp, [pv, m], INDEX), m], I1, pred="eq")
            cond = e.scf_if(e.v(arith.OrIOp, [hit, last], I1))
            with e.into(cond.then_block):
                _fold(e, part, e.const(src, INDEX), out if dst is None else part,
                      r if dst is None else e.const(dst, INDEX), d, c0, c1)
                e.end(scf.YieldOp, cond.then_block)
        e.end(slc.YieldOp, cb.body)


def _fold(e: Emitter, part: Value, src: Value, into: Value, at: Value, d: Value, c0: Value,
          c1: Value) -> None:
    """``into[at, :] += part[src, :]; part[src, :] = 0``."""
    zero = e.const(0.0, F32)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        x = e.v(memref.LoadOp, [part, src, loop.iv], F32)
        old = e.v(memref.LoadOp, [into, at, loop.iv], F32)
        e.op(memref.StoreOp, [e.v(arith.AddFOp, [old, x], F32), into, at, loop.iv])
        e.op(memref.StoreOp, [zero, part, src, loop.iv])
        e.end(scf.YieldOp, loop.body)
