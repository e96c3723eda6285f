"""A padded bag's rows added in the orders of XLA:CPU other than one after the other, on the
execute unit, as the native kernels add them (the CPU rewrite's ``sum_order``): each lookup's
element goes into a partial sum, a row of a core buffer ``[k, D]`` zeroed at the start of each
bag, and a callback after each lookup ``p`` (of a bag of ``P`` rows, static) folds them:

- ``blocked`` (YNNPACK's reduce, ``native/blocked_sum.cc``): rows 0..2 are the block, 16-row
  and 256-row sums; after ``p & 3 == 3`` the block sum is added into the 16-row sum, after
  ``p & 15 == 15`` that into the 256-row sum, after ``p & 255 == 255`` that into the output
  row; the last row folds all three. Weighted only for f16 tables and weights (each product
  rounded to f16, as the kernel).
- ``vector8`` (XLA's vectorized loop, ``native/window_sum.cc``): row ``p`` of the first
  ``F = P - P % 8`` rows into partial ``p % 8``; after row ``F - 1`` the 8 partials fold in
  halves (j + j+4, j + j+2, j + j+1); the rest into partial 0; after the last row the output
  row is partial 0 (stored, not added: a -0 stays -0).
- ``tree32`` (XLA's tree-reduction windows of 32 rows, ``kSame`` padding of ``L`` rows before
  the first): one partial; after ``(p + L) & 31 == 31`` or the last row it is added into the
  output row.
Every partial sum starts from zero, as the kernels'; sum or mean into f32 from 0 only."""

from __future__ import annotations

from ember_xla.call_specs import ClusterSpec, LoweringRefused
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.lower.emit import Emitter, accumulate, fill_row
from ember_xla.ir.types import F32, I1, INDEX, MemRefType
from ember_xla.ir.value import Value

#: partial sums (rows of the core buffer) per order
PARTIALS = {"blocked": 3, "vector8": 8, "tree32": 1}
#: blocked: (mask of p, partial folded, into; None: the output row)
BLOCK_FOLDS = ((3, 0, 1), (15, 1, 2), (255, 2, None))
LANES, WINDOW = 8, 32


def check_order(spec: ClusterSpec) -> None:
    """The forms the kernels sum in these orders (else ``LoweringRefused``)."""
    out, order = spec.outputs[0].dtype, spec.sum_order
    if spec.combiner not in ("sum", "mean") or out != "f32" or spec.init != 0.0:
        raise LoweringRefused(f"{spec.name}: a {order}-order bag of {spec.combiner} into {out} "
                              f"from {spec.init} is not one the kernel sums in that order")
    table, weights = spec.parts[0].table.dtype, spec.parts[0].weights
    if spec.weighted and not (order == "blocked" and table in ("f16", "f32")
                              and weights.dtype == table):
        raise LoweringRefused(f"{spec.name}: a weighted {order}-order bag is lowered only in "
                              "the blocked order of f16 or f32 tables with weights of their "
                              "type (the kernel's rounded products)")


def scratch(e: Emitter, order: str, d: Value) -> Value:
    """The core buffer of the partial sums, ``[k, D]`` f32."""
    return e.v(memref.AllocOp, [e.const(PARTIALS[order], INDEX), d],
               MemRefType((None, None), F32), "partial")


def zero_partials(e: Emitter, order: str, part: Value, d: Value, c0: Value, c1: Value
                  ) -> None:
    """Inside a callback: every partial row = 0."""
    zero = e.const(0.0, F32)
    for k in range(PARTIALS[order]):
        fill_row(e, part, e.const(k, INDEX), d, zero, c0, c1)


def add_to_partial(e: Emitter, order: str, part: Value, p: Value, width: int, c: Value,
                   value: Value) -> None:
    """Inside the per-element callback of lookup ``p`` (a value): ``part[lane, c] += value``
    (vector8: lane ``p % 8`` over the first ``width - width % 8`` rows, else 0)."""
    lane = e.const(0, INDEX)
    if order == "vector8":
        full = e.const(width // LANES * LANES, INDEX)
        inside = e.v(arith.CmpIOp, [p, full], I1, pred="slt")
        lane = e.v(arith.SelectOp, [inside, e.v(arith.AndIOp, [p, e.const(LANES - 1, INDEX)],
                                                  INDEX), lane], INDEX)
    accumulate(e, part, lane, c, value, "sum")


def fold_callback(e: Emitter, order: str, part: Value, out: Value, row: Value, p: Value,
                  width: int, d: Value, c0: Value, c1: Value) -> None:
    """The callback after lookup ``p`` (a stream) of a bag of ``width`` rows into
    ``out[row]``."""
    cb = e.callback()
    with e.into(cb.body):
        pv, r = e.read(p), e.read(row)
        last = _eq(e, pv, width - 1)
        if order == "blocked":
            for mask, src, dst in BLOCK_FOLDS:
                hit = _eq(e, e.v(arith.AndIOp, [pv, e.const(mask, INDEX)], INDEX), mask)
                with e.then(e.v(arith.OrIOp, [hit, last], I1)):
                    _fold(e, part, src, out if dst is None else part,
                          r if dst is None else e.const(dst, INDEX), d, c0, c1)
        elif order == "tree32":
            low = (-(-width // WINDOW) * WINDOW - width) // 2
            shifted = e.v(arith.AddIOp, [pv, e.const(low, INDEX)], INDEX)
            hit = _eq(e, e.v(arith.AndIOp, [shifted, e.const(WINDOW - 1, INDEX)], INDEX),
                      WINDOW - 1)
            with e.then(e.v(arith.OrIOp, [hit, last], I1)):
                _fold(e, part, 0, out, r, d, c0, c1)
        else:
            full = width // LANES * LANES
            if full:
                with e.then(_eq(e, pv, full - 1)):
                    half = LANES // 2
                    while half:
                        for j in range(half):
                            _fold(e, part, j + half, part, e.const(j, INDEX), d, c0, c1,
                                  clear=False)
                        half //= 2
            with e.then(last):
                _copy(e, part, out, r, d, c0, c1)
        e.end(slc.YieldOp, cb.body)


def _eq(e: Emitter, v: Value, k: int) -> Value:
    return e.v(arith.CmpIOp, [v, e.const(k, INDEX)], I1, pred="eq")


def _fold(e: Emitter, part: Value, src: int, into: Value, at: Value, d: Value, c0: Value,
          c1: Value, clear: bool = True) -> None:
    """``into[at, :] += part[src, :]`` (and ``part[src, :] = 0``)."""
    s = e.const(src, INDEX)
    zero = e.const(0.0, F32)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        x = e.v(memref.LoadOp, [part, s, loop.iv], F32)
        old = e.v(memref.LoadOp, [into, at, loop.iv], F32)
        e.op(memref.StoreOp, [e.v(arith.AddFOp, [old, x], F32), into, at, loop.iv])
        if clear:
            e.op(memref.StoreOp, [zero, part, s, loop.iv])
        e.end(scf.YieldOp, loop.body)


def _copy(e: Emitter, part: Value, out: Value, r: Value, d: Value, c0: Value, c1: Value
          ) -> None:
    """``out[r, :] = part[0, :]``."""
    z = e.const(0, INDEX)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        e.op(memref.StoreOp, [e.v(memref.LoadOp, [part, z, loop.iv], F32), out, r, loop.iv])
        e.end(scf.YieldOp, loop.body)
