"""``ember_xla.embedding_bag``: call the native embedding-bag kernels directly from JAX."""

from __future__ import annotations

from typing import Any

from ember_xla.targets import OFFSETS_BAG, SEGMENT_REDUCE

_COMBINERS = ("sum", "mean", "max", "min", "sqrt_n")


def embedding_bag(table: Any, indices: Any, offsets: Any = None, *, segment_ids: Any = None,
                  num_segments: int | None = None, weights: Any = None, combiner: str = "sum",
                  mode: str = "clip", wrap_negative: bool = False,
                  init: float | None = None) -> Any:
    """Pool rows of ``table`` [N, D] looked up by ``indices`` [L] into bags.

    Give either ``offsets`` [B+1] (bag b is ``indices[offsets[b]:offsets[b+1]]``) or
    ``segment_ids`` [L] with ``num_segments``; ``weights`` [L] multiply the rows first.
    ``mode``: "clip" clamps out-of-range indices (XLA gather), "fill" gives NaN rows (jnp.take).
    ``wrap_negative`` maps i < 0 to i + N first. Empty bags give ``init`` (0 for sum/mean,
    -inf for max, +inf for min). Runs on the CPU through the registered FFI targets.
    """
    import jax
    import jax.numpy as jnp

    from ember_xla.native import register_targets

    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of {_COMBINERS}, got {combiner!r}")
    if mode not in ("clip", "fill"):
        raise ValueError(f"mode must be 'clip' or 'fill', got {mode!r}")
    if (offsets is None) == (segment_ids is None):
        raise ValueError("give exactly one of offsets= or segment_ids=")
    register_targets()
    table = jnp.asarray(table)
    if init is None:
        init = {"max": float("-inf"), "min": float("inf")}.get(combiner, 0.0)
    operands = [table, jnp.asarray(indices)]
    if offsets is not None:
        offsets = jnp.asarray(offsets)
        rows, target = offsets.shape[0] - 1, OFFSETS_BAG.name
        operands.append(offsets)
    else:
        if num_segments is None:
            raise ValueError("segment_ids= needs num_segments=")
        rows, target = int(num_segments), SEGMENT_REDUCE.name
        operands.append(jnp.asarray(segment_ids))
    if weights is not None:
        operands.append(jnp.asarray(weights, dtype=table.dtype))
    out = jax.ShapeDtypeStruct((rows, table.shape[1]), table.dtype)
    call = jax.ffi.ffi_call(target, out)
    return call(*operands, combiner=combiner, index_mode=mode,
                wrap_negative=bool(wrap_negative), weighted=weights is not None,
                init=float(init), index_bits=64)
