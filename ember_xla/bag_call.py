"""One ``ember_xla.embedding_bag`` call: its attributes (``BagSpec``), which row and which bag
each lookup reads, and the native custom-call they select, with a batching rule: under
``jax.vmap`` the K calls of a batch become ONE call of the same kernel over K times the bags
(an offsets bag becomes a segment bag, a padded bag stays padded; a batched table is stacked
into one [K*N, D] table after each lookup's row was resolved in its own table), so a vmapped
bag runs no loop and gives each element's own floats."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from ember_xla.custom_calls import OFFSETS_BAG, PADDED_BAG, SEGMENT_REDUCE

#: offsets: bounds [B+1], bag b is indices[offsets[b]:offsets[b+1]]; segments: bounds are the
#: segment ids [L]; padded: indices [B, P], bag b is indices[b], no bounds.
TARGETS = {"offsets": OFFSETS_BAG.name, "segments": SEGMENT_REDUCE.name,
           "padded": PADDED_BAG.name}
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class BagSpec:
    """Everything about a bag call that is not an array."""

    layout: str               # offsets | segments | padded
    rows: int                 # bags (offsets, padded) or segments
    combiner: str
    mode: str                 # clip | fill
    wrap_negative: bool
    weighted: bool
    init: float

    def operands(self, table: Any, indices: Any, bounds: Any, weights: Any) -> list:
        return [table, indices, *([] if self.layout == "padded" else [bounds]),
                *([weights] if self.weighted else [])]


_DTYPE_NAMES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def _padded_order(spec: BagSpec, table: Any, ids: Any) -> str:
    """The order XLA:CPU adds the rows of the same bag written in jnp (``t[ids].sum(1)``, or
    ``jnp.take(t, ids, mode=...)`` for the call's index mode, with the call's id type), so the
    call gives the same bits; row after row where that order is not reproduced."""
    from ember_xla.native.padded_order import (
        BagSum,
        OrderNotReproduced,
        minmax_order,
        sum_order,
    )

    b, p = ids.shape
    dtype = str(jnp.dtype(table.dtype))
    bag = BagSum(b, p, table.shape[1], _DTYPE_NAMES.get(dtype, dtype), spec.combiner,
                 spec.init, spec.weighted, None,
                 "s32" if jnp.dtype(ids.dtype) == jnp.int32 else "s64", spec.mode,
                 spec.wrap_negative)
    try:
        # max/min: XLA:CPU's NaN and signed-zero semantics (its loop's or YNNPACK's)
        return minmax_order(bag) if spec.combiner in ("max", "min") else sum_order(bag)
    except OrderNotReproduced:
        return "sequential"


def _native(spec: BagSpec, table: Any, *operands: Any) -> Any:
    out = jax.ShapeDtypeStruct((spec.rows, table.shape[1]), table.dtype)
    order = ({"sum_order": _padded_order(spec, table, operands[0]), "row_type": ""}
             if spec.layout == "padded" else {})
    return jax.ffi.ffi_call(TARGETS[spec.layout], out)(
        table, *operands, combiner=spec.combiner, index_mode=spec.mode,
        wrap_negative=spec.wrap_negative, weighted=spec.weighted, init=spec.init, index_bits=64,
        **order)


def bag_call(spec: BagSpec, table: Any, indices: Any, bounds: Any, weights: Any) -> Any:
    """The pooled rows ``[spec.rows, D]``: the native kernel, batchable under ``jax.vmap``."""
    fn = custom_vmap(functools.partial(_native, spec))
    fn.def_vmap(functools.partial(_batched, spec))
    return fn(*spec.operands(table, indices, bounds, weights))


def _outside_to(x: Any, n: int) -> Any:
    """``x`` with every value outside ``[0, n)`` replaced by ``n``."""
    return jnp.where((x < 0) | (x >= n), n, x)


def lookup_bags(spec: BagSpec, indices: Any, bounds: Any) -> Any:
    """The bag of every lookup of a 1-D bag; ``spec.rows`` (outside every bag) where none."""
    if spec.layout == "segments":
        return _outside_to(bounds, spec.rows)
    pos = jnp.arange(indices.shape[0], dtype=bounds.dtype)
    bag = jnp.searchsorted(bounds, pos, side="right") - 1
    inside = (pos >= bounds[0]) & (pos < bounds[-1])
    return jnp.where(inside, bag, spec.rows)


def effective_indices(spec: BagSpec, n_rows: int, indices: Any) -> Any:
    """The row each lookup reads (clip: clamped) or ``n_rows`` where fill mode reads none."""
    if spec.wrap_negative:
        indices = jnp.where(indices < 0, indices + n_rows, indices)
    if spec.mode == "clip":
        return jnp.clip(indices, 0, n_rows - 1)
    return _outside_to(indices, n_rows)


def _index_dtype(size: int, like: Any, what: str) -> Any:
    if size <= _INT32_MAX:
        return like.dtype
    if not jax.config.jax_enable_x64:
        raise ValueError(f"jax.vmap of embedding_bag: {size} {what} need 64-bit indices; "
                         "enable jax_enable_x64 or vmap over fewer elements")
    return jnp.int64


def _batched(spec: BagSpec, size: int, in_batched: list, table: Any, indices: Any,
             *rest: Any) -> tuple[Any, bool]:
    """The batching rule: ``size`` calls (arguments with ``in_batched`` leading axes) as one."""
    def full(x: Any, batched: bool) -> Any:
        return x if batched else jnp.broadcast_to(x, (size, *x.shape))

    idx = full(indices, in_batched[1])
    bounds = None if spec.layout == "padded" else full(rest[0], in_batched[2])
    weights = full(rest[-1], in_batched[-1]) if spec.weighted else None
    if in_batched[0]:  # element k reads table k: its rows are k*N .. k*N+N-1 of the stack
        n = table.shape[1]
        dtype = _index_dtype(size * n, idx, "stacked table rows")
        eff = effective_indices(spec, n, idx).astype(dtype)
        k = jnp.arange(size, dtype=dtype).reshape(size, *[1] * (idx.ndim - 1))
        idx = jnp.where(eff == n, size * n, eff + k * n)  # fill mode: a row of no table
        table = table.reshape(size * n, table.shape[2])
        spec = dataclasses.replace(spec, wrap_negative=False)
    if spec.layout == "padded":
        flat = dataclasses.replace(spec, rows=size * spec.rows)
        out = bag_call(flat, table, idx.reshape(size * spec.rows, -1), None,
                       None if weights is None else weights.reshape(size * spec.rows, -1))
        return out.reshape(size, spec.rows, -1), True
    seg = (jax.vmap(functools.partial(lookup_bags, spec))(idx, bounds)
           if spec.layout == "offsets" else bounds)
    rows = size * spec.rows
    seg = seg.astype(_index_dtype(rows, seg, "segments"))
    k = jnp.arange(size, dtype=seg.dtype)[:, None]
    seg = jnp.where((seg >= 0) & (seg < spec.rows), seg + k * spec.rows, rows)  # else dropped
    flat = dataclasses.replace(spec, layout="segments", rows=rows)
    out = bag_call(flat, table, idx.reshape(-1), seg.reshape(-1),
                   None if weights is None else weights.reshape(-1))
    return out.reshape(size, spec.rows, -1), True
