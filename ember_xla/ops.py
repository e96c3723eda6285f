"""``ember_xla.embedding_bag``: call the native embedding-bag kernels directly from JAX: the
arguments checked here (one-line errors), the call and its batching rule in bag_call.py, its
VJP in bag_vjp.py; padded bags of one row are the gather XLA makes of them (bag_gather.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

_COMBINERS = ("sum", "mean", "max", "min", "sqrt_n")
TABLE_DTYPES = ("float32", "bfloat16", "float16")  # what the native kernels read
INDEX_DTYPES = ("int32", "int64")                   # indices, offsets, segment ids


class ArgumentDtypeError(TypeError, ValueError):
    """An argument of a dtype the kernels do not take (a TypeError; also a ValueError, as every
    other refused argument is)."""


def _array(name: str, x: Any, rank: int | tuple[int, ...], kinds: str,
           dtypes: tuple[str, ...] | None = None) -> Any:
    """``x`` as an array (numpy, or the jax array/tracer as given) of ``rank`` (or one of them)
    and a dtype kind in ``kinds`` (and, if given, one of ``dtypes``); else an error naming the
    argument."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        try:
            x = np.asarray(x)
        except (ValueError, TypeError, OverflowError) as e:
            raise ValueError(f"{name} must be an array: {e}") from None
    ranks = (rank,) if isinstance(rank, int) else rank
    if len(x.shape) not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{name} must be {want}, got shape {list(x.shape)}")
    kind = np.dtype(x.dtype).kind if str(x.dtype) != "bfloat16" else "f"
    if kind not in kinds or (kind == "f" and "f" not in kinds):
        want = "floating point" if kinds == "f" else "integer"
        raise ArgumentDtypeError(f"{name} must have {want} dtype, got {x.dtype}")
    if dtypes is not None and str(x.dtype) not in dtypes:
        raise ArgumentDtypeError(f"{name} must be {' or '.join(dtypes)} (what the kernels "
                                 f"read), got {x.dtype}; convert it with .astype()")
    return x


def _check_values(name: str, x: Any, lo: int, hi: int, monotone: bool = False) -> None:
    """Range (and order) of concrete values; traced values are checked by nothing here."""
    import jax

    if isinstance(x, jax.core.Tracer) or x.size == 0:
        return
    v = np.asarray(x).reshape(-1)
    if v.min() < lo or v.max() > hi:
        raise ValueError(f"{name} values must lie in [{lo}, {hi}], got [{v.min()}, {v.max()}]"
                         " (the kernels index with 32-bit bag boundaries)")
    if monotone and np.any(np.diff(v) < 0):
        raise ValueError(f"{name} must never decrease (bag b is indices[offsets[b]:offsets[b+1]])")


def _layout(indices: Any, offsets: Any, segment_ids: Any, num_segments: Any
            ) -> tuple[str, int, Any]:
    """(layout, bags or segments, the bounds array or None) of a call's arguments."""
    n_lookups = indices.shape[0]
    if indices.ndim == 2:
        if offsets is not None or segment_ids is not None:
            raise ValueError("indices [B, P] are padded bags (bag b is indices[b]): give no "
                             "offsets= or segment_ids=")
        return "padded", n_lookups, None
    if (offsets is None) == (segment_ids is None):
        raise ValueError("give exactly one of offsets= or segment_ids= (or indices [B, P] for "
                         "padded bags)")
    if offsets is not None:
        offsets = _array("offsets", offsets, 1, kinds="iu", dtypes=INDEX_DTYPES)
        if offsets.shape[0] < 1:
            raise ValueError("offsets must have at least one entry (B+1 entries for B bags)")
        _check_values("offsets", offsets, 0, n_lookups, monotone=True)
        return "offsets", offsets.shape[0] - 1, offsets
    if num_segments is None:
        raise ValueError("segment_ids= needs num_segments=")
    if isinstance(num_segments, bool) or not isinstance(num_segments, (int, np.integer)) \
            or not 0 <= int(num_segments) < 2**31:
        raise ValueError(f"num_segments must be an integer in [0, 2^31), got {num_segments!r}")
    segment_ids = _array("segment_ids", segment_ids, 1, kinds="iu", dtypes=INDEX_DTYPES)
    if segment_ids.shape[0] != n_lookups:
        raise ValueError(f"segment_ids must have one entry per index ({n_lookups}), has "
                         f"{segment_ids.shape[0]}")
    _check_values("segment_ids", segment_ids, -2**31, 2**31 - 1)
    return "segments", int(num_segments), segment_ids


def embedding_bag(table: Any, indices: Any, offsets: Any = None, *, segment_ids: Any = None,
                  num_segments: int | None = None, weights: Any = None, combiner: str = "sum",
                  mode: str = "clip", wrap_negative: bool = False,
                  init: float | None = None) -> Any:
    """Pool rows of ``table`` [N, D] looked up by ``indices`` into bags.

    ``indices`` [L] with either ``offsets`` [B+1] (bag b is ``indices[offsets[b]:offsets[b+1]]``)
    or ``segment_ids`` [L] with ``num_segments``; or ``indices`` [B, P], padded bags (bag b is
    ``indices[b]``, P lookups; mask padding with zero ``weights``). ``weights`` (the shape of
    ``indices``) multiply the rows first. ``mode``: "clip" clamps out-of-range indices (XLA
    gather), "fill" gives NaN rows (jnp.take). ``wrap_negative`` maps i < 0 to i + N first.
    Empty bags give ``init`` (0 for sum/mean, -inf for max, +inf for min); mean and sqrt_n of a
    padded bag divide by P. ``offsets`` has B+1 entries (torch's ``include_last_offset=True``
    form); lookups outside ``[offsets[0], offsets[-1])`` are in no bag, so torch's default
    offsets (B starts) need ``len(indices)`` appended. The result has the table's type: a
    bf16/f16 table is summed in bf16/f16, each add rounded (XLA's scatter does the same),
    while ``t[ids].sum(1)`` in jnp sums bf16 in f32 -- pass ``table.astype(jnp.float32)`` for
    f32 sums. A padded bag of one row (``indices [B, 1]``, the default init) is
    its (weighted) row, computed as the gather XLA:CPU makes of ``jnp.take(...).sum(1)``
    (bag_gather.py: a -0.0 row stays -0.0, and it is faster than a call). Otherwise it runs
    on the CPU through the registered FFI targets; ``jax.vmap``
    over any argument makes one call (bag_call.py). Differentiable (``jax.grad``, also under
    ``jax.jit``) in ``table`` and ``weights`` for sum, mean and sqrt_n (bag_vjp.py).
    """
    import jax.numpy as jnp

    from ember_xla.bag_call import BagSpec
    from ember_xla.bag_gather import is_one_row_bag, one_row_bags
    from ember_xla.bag_vjp import differentiable_bag
    from ember_xla.native import register_targets
    from ember_xla.runtime.xla_cpu import cache_result_buffers

    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of {_COMBINERS}, got {combiner!r}")
    if mode not in ("clip", "fill"):
        raise ValueError(f"mode must be 'clip' or 'fill', got {mode!r}")
    table = _array("table", table, 2, kinds="f", dtypes=TABLE_DTYPES)
    indices = _array("indices", indices, (1, 2), kinds="iu", dtypes=INDEX_DTYPES)
    layout, rows, bounds = _layout(indices, offsets, segment_ids, num_segments)
    _check_values("indices", indices, -2**31, 2**31 - 1)
    if mode == "clip" and table.shape[0] == 0 and indices.size > 0:
        raise ValueError("table has no rows: mode='clip' needs at least one row to clamp to "
                         "(mode='fill' gives NaN rows)")
    if weights is not None:
        weights = _array("weights", weights, indices.ndim, kinds="fiu")
        if weights.shape != indices.shape:
            raise ValueError(f"weights must have one entry per index (shape "
                             f"{list(indices.shape)}), has shape {list(weights.shape)}")
    if init is None:
        init = {"max": float("-inf"), "min": float("inf")}.get(combiner, 0.0)
    if isinstance(init, bool) or not isinstance(init, (int, float, np.integer, np.floating)):
        raise ArgumentDtypeError(f"init must be a real number, got {type(init).__name__}")
    try:
        init = float(init)
    except OverflowError:
        raise ValueError(f"init must fit a float64, got an integer of {int(init).bit_length()}"
                         " bits") from None
    table = jnp.asarray(table)
    spec = BagSpec(layout, rows, combiner, mode, bool(wrap_negative), weights is not None, init)
    if is_one_row_bag(spec, table, indices):
        return one_row_bags(spec, table, jnp.asarray(indices),
                            None if weights is None else jnp.asarray(weights, table.dtype))
    register_targets()
    cache_result_buffers()
    return differentiable_bag(spec, table, jnp.asarray(indices),
                              None if bounds is None else jnp.asarray(bounds),
                              None if weights is None else jnp.asarray(weights, table.dtype))
