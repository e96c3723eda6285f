"""The building blocks of the SLC lowering: an op emitter with an insertion block, and the
pieces every cluster kind shares, exactly as docs/CUSTOM_CALL.md specifies them: index
preprocessing on the access side (wrap_negative, index_bits, clip/fill/zero), the looked-up
value on the core side (fill -> NaN, zero -> 0, weights, f32 accumulation of bf16/f16 tables),
the combine step, the init value and the mean/sqrt_n finish of a row."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ember_xla.call_specs import ClusterSpec, LoweringRefused
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.dialects.slc import INDEX_STREAM, StreamType
from ember_xla.ir.block import Block
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.types import BF16, F16, F32, I1, I32, I64, INDEX, Type, numpy_dtype
from ember_xla.ir.value import Value

DTYPES: dict[str, Type] = {"f32": F32, "bf16": BF16, "f16": F16, "s32": I32, "s64": I64,
                           "pred": I1}


class Emitter:
    """Appends ops to ``block`` (switch with ``into``)."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def op(self, cls: type[OpDef], operands: Sequence[Value], result_types: Sequence[Any] = (),
           name: str = "", **attrs: Any) -> OpDef:
        o = cls.create(list(operands), list(result_types), attrs or None, name=name)
        self.block.append(o)
        return o

    def v(self, cls: type[OpDef], operands: Sequence[Value], result_type: Any, name: str = "",
          **attrs: Any) -> Value:
        return self.op(cls, operands, [result_type], name, **attrs).result

    @contextlib.contextmanager
    def into(self, block: Block) -> Iterator[None]:
        saved, self.block = self.block, block
        try:
            yield
        finally:
            self.block = saved

    # -- shorthands -------------------------------------------------------------------------
    def const(self, value: Any, t: Type, name: str = "") -> Value:
        return self.v(arith.ConstantOp, [], t, name, value=value)

    def stream(self, v: Value, name: str = "") -> Value:
        return self.v(slc.ToStreamOp, [v], StreamType.of(v.type), name)

    def read(self, s: Value) -> Value:
        """``slc.from_stream`` (inside a callback)."""
        return self.v(slc.FromStreamOp, [s], s.type.elem)

    def alu(self, op: str, operands: Sequence[Value], elem: Type = INDEX) -> Value:
        return self.v(slc.AluStreamOp, operands, StreamType.of(elem), op=op)

    def mem(self, m: Value, idx: Sequence[Value]) -> Value:
        return self.v(slc.MemStreamOp, [m, *idx], StreamType.of(m.type.elem))

    def dim(self, m: Value, d: int, name: str = "") -> Value:
        return self.v(memref.DimOp, [m], INDEX, name, dim=d)

    def slc_for(self, lb: Value, ub: Value, step: Value, iv_name: str) -> slc.ForOp:
        loop = slc.ForOp.build(lb, ub, step, iv_name=iv_name)
        self.block.append(loop)
        return loop

    def callback(self) -> slc.CallbackOp:
        cb = slc.CallbackOp.build()
        self.block.append(cb)
        return cb

    def scf_for(self, lb: Value, ub: Value, step: Value) -> scf.ForOp:
        loop = scf.ForOp.build(lb, ub, step)
        self.block.append(loop)
        return loop

    def scf_if(self, cond: Value) -> scf.IfOp:
        op = scf.IfOp.build(cond)
        self.block.append(op)
        return op

    @contextlib.contextmanager
    def then(self, cond: Value) -> Iterator[None]:
        """``with e.then(cond):`` the ops emitted in the block run when ``cond`` (an
        ``scf.if`` without else, its yield added at the end)."""
        op = self.scf_if(cond)
        with self.into(op.then_block):
            yield
        self.end(scf.YieldOp, op.then_block)

    def end(self, yield_cls: type[OpDef], block: Block) -> None:
        """Terminate ``block`` with an empty yield."""
        block.append(yield_cls.create([]))


def elem_type(dtype: str) -> Type:
    if dtype not in DTYPES:
        raise LoweringRefused(f"element type {dtype} is not supported")
    return DTYPES[dtype]


def rounded(x: float, t: Type) -> float:
    """``x`` (f64) -> f32 -> ``t``, round to nearest even each time (the kernels' init)."""
    with np.errstate(over="ignore"):  # e.g. the lowest f32 as f16: -inf, as XLA rounds it
        return float(np.asarray(np.float32(x)).astype(numpy_dtype(t)))


def preprocess_index(e: Emitter, raw: Value, spec: ClusterSpec, s_n: Value,
                     n_rows: int) -> tuple[Value | None, Value | None]:
    """Access-side index preprocessing of one lookup stream. Returns (row index stream or
    None when no row can be loaded, in-range flag stream or None when every row is valid)."""
    i = raw
    if spec.wrap_negative:
        i = e.alu("wrapneg", [i, s_n])
    if spec.index_bits == 32 and i.type.elem != I32:
        i = e.alu("trunc32", [i])
    if spec.index_mode == "clip":
        if n_rows == 0:
            return None, None  # only reached without lookups (refused otherwise)
        return e.alu("clamp", [i, s_n]), None
    ok = e.alu("inrange", [i, s_n], I1)
    if n_rows == 0:
        return None, ok
    return e.alu("clamp", [i, s_n]), ok


def fill_value(spec: ClusterSpec) -> float:
    """What an out-of-range lookup reads in fill mode: NaN, 0 for index_mode "zero"
    (``jnp.take``'s ``fill_value``)."""
    return 0.0 if spec.index_mode == "zero" else float("nan")


def looked_up_value(e: Emitter, row: Value | None, ok: Value | None, w: Value | None,
                    t: Type, o: Type, fill: float) -> Value:
    """Core side: the value one lookup contributes, in the accumulation type ``o`` (``fill``:
    the value of a lookup outside the table)."""
    if row is None:  # fill mode on a table without rows: every lookup is the fill row
        x = e.const(fill, t)
    else:
        x = e.read(row)
        if ok is not None:
            missing = e.const(fill, t)
            x = e.v(arith.SelectOp, [e.read(ok), x, missing], t)
    if w is not None:
        wv = e.read(w)
        if o == t:  # weights of T's type: product rounded to T
            return e.v(arith.MulFOp, [x, wv], t)
        if wv.type == o:  # f32 weights multiply after the convert
            return e.v(arith.MulFOp, [e.v(arith.ExtFOp, [x], o), wv], o)
        if t == BF16:  # bf16 weights, f32 result: XLA:CPU keeps the product in f32
            return e.v(arith.MulFOp, [e.v(arith.ExtFOp, [x], o), e.v(arith.ExtFOp, [wv], o)], o)
        return e.v(arith.ExtFOp, [e.v(arith.MulFOp, [x, wv], t)], o)  # f16: rounded to f16
    return x if o == t else e.v(arith.ExtFOp, [x], o)


def add_lookup(e: Emitter, spec: ClusterSpec, out: Value, r: Value, c: Value,
               row: Value | None, ok: Value | None, w: Value | None, t: Type) -> None:
    """``out[r, c] = combine(out[r, c], value of one lookup)``; a weighted f32 sum of a padded
    bag with ``sum_order = "sequential_fma"`` adds each weighted element with one fused
    multiply-add, ``fma(f32(x), f32(w), out[r, c])``, as the kernel does (native/reduce.cc:
    f32 result, the product an f32 value, i.e. not f16 rows times f16 weights)."""
    o = out.type.elem
    if (w is not None and spec.kind == "padded_bag" and spec.sum_order == "sequential_fma"
            and o == F32
            and COMBINE[spec.combiner] is arith.AddFOp):
        wv = e.read(w)
        if not (t == F16 and wv.type == F16):
            x = looked_up_value(e, row, ok, None, t, o, fill_value(spec))
            wf = wv if wv.type == F32 else e.v(arith.ExtFOp, [wv], F32)
            old = e.v(memref.LoadOp, [out, r, c], o)
            e.op(memref.StoreOp, [e.v(arith.FmaOp, [x, wf, old], o), out, r, c])
            return
    accumulate(e, out, r, c, looked_up_value(e, row, ok, w, t, o, fill_value(spec)),
               spec.combiner)


COMBINE = {"sum": arith.AddFOp, "mean": arith.AddFOp, "sqrt_n": arith.AddFOp,
           "max": arith.MaxFOp, "min": arith.MinFOp}


def accumulate(e: Emitter, out: Value, r: Value, c: Value, val: Value, combiner: str) -> None:
    """``out[r, c] = combine(out[r, c], val)`` (rounded once to the output type)."""
    o = out.type.elem
    old = e.v(memref.LoadOp, [out, r, c], o)
    new = e.v(COMBINE[combiner], [old, val], o)
    e.op(memref.StoreOp, [new, out, r, c])


def start_value(spec: ClusterSpec, o: Type) -> float:
    """What an output row starts from: 0 for mean/sqrt_n (init only for empty rows)."""
    return 0.0 if spec.combiner in ("mean", "sqrt_n") else rounded(spec.init, o)


def fill_row(e: Emitter, out: Value, r: Value, d: Value, value: Value, c0: Value,
             c1: Value) -> None:
    """``out[r, :] = value`` (core loop over the row)."""
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        e.op(memref.StoreOp, [value, out, r, loop.iv])
        e.end(scf.YieldOp, loop.body)


def finish_row(e: Emitter, spec: ClusterSpec, out: Value, r: Value, count: Value, d: Value,
               c0: Value, c1: Value) -> None:
    """mean/sqrt_n: ``out[r, :] = count ? round(f32(out) * scale) : init`` with
    scale = 1/count or 1/sqrt(count) in f32 (the form XLA's simplifier produces)."""
    o = out.type.elem
    cnt = count
    n = e.v(arith.SIToFPOp, [cnt], F32)
    one = e.const(1.0, F32)
    den = n if spec.combiner == "mean" else e.v(arith.SqrtOp, [n], F32)
    scale = e.v(arith.DivFOp, [one, den], F32)
    zero = e.const(0, cnt.type)
    empty = e.v(arith.CmpIOp, [cnt, zero], I1, pred="eq")
    init = e.const(rounded(spec.init, o), o)
    loop = e.scf_for(c0, d, c1)
    with e.into(loop.body):
        acc = e.v(memref.LoadOp, [out, r, loop.iv], o)
        wide = acc if o == F32 else e.v(arith.ExtFOp, [acc], F32)
        prod = e.v(arith.MulFOp, [wide, scale], F32)
        res = prod if o == F32 else e.v(arith.TruncFOp, [prod], o)
        e.op(memref.StoreOp, [e.v(arith.SelectOp, [empty, init, res], o), out, r, loop.iv])
        e.end(scf.YieldOp, loop.body)


def coords(e: Emitter, arr: Value, shape: tuple[int, ...], natural: tuple[int, ...],
           idx: Sequence[Value], s0: Value) -> list[Value]:
    """Index streams reading element ``idx`` (coordinates in ``natural`` shape) of an array of
    ``shape``: the same shape, trailing 1-dims, or a flat row-major array."""
    k = len(natural)
    if shape[:k] == natural and all(x == 1 for x in shape[k:]):
        return [*idx, *([s0] * (len(shape) - k))]
    if len(shape) == 1 and k == 2:
        s_p = e.stream(e.const(natural[1], INDEX))
        return [e.alu("add", [e.alu("mul", [idx[0], s_p]), idx[1]])]
    raise LoweringRefused(f"an operand of shape {list(shape)} cannot be read as "
                          f"{list(natural)}")


__all__ = ["INDEX_STREAM", "Emitter", "accumulate", "coords", "elem_type", "fill_row",
           "fill_value", "finish_row", "looked_up_value", "preprocess_index", "rounded",
           "start_value"]
