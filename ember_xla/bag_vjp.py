"""The VJP of ``ember_xla.embedding_bag``: a ``jax.custom_vjp`` around the native forward call
whose backward is written in JAX ops, in the order XLA's own autodiff of the equivalent
``jnp.take`` + segment reduction computes it, so both give the same floats:

- cotangent of the pooled rows: ``cot / count`` (mean) or ``cot / sqrt(count)`` (sqrt_n), count
  at least 1, then gathered per lookup by its bag (0 for lookups outside every bag);
- times the lookup's weight; then a scatter-add into a zero ``[N, D]`` table at the clamped
  index (``clip``) or dropping indices outside ``[0, N)`` (``fill``);
- the weights' cotangent: ``sum_d(rows * per-lookup cotangent)`` with the looked-up rows.

max and min bags have no VJP here (JAX's gradient of a segment max shares it among tied
lookups by a rule not reproduced here): ``jax.grad`` reaching one raises a ValueError.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class BagSpec:
    """Everything about a bag call that is not an array: the native call and its attributes."""

    call: Callable            # (table, indices, bounds[, weights]) -> pooled [rows, D]
    by_offsets: bool          # bounds are offsets [B+1] (else segment ids [L])
    rows: int                 # bags (offsets) or segments
    combiner: str
    mode: str                 # clip | fill
    wrap_negative: bool


def _forward(spec: BagSpec, table: Any, indices: Any, bounds: Any, weights: Any) -> Any:
    return spec.call(table, indices, bounds, *([] if weights is None else [weights]))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def differentiable_bag(spec: BagSpec, table: Any, indices: Any, bounds: Any,
                       weights: Any) -> Any:
    """``spec.call`` with a VJP for the table (and the weights, when given)."""
    return _forward(spec, table, indices, bounds, weights)


def _fwd(spec: BagSpec, table: Any, indices: Any, bounds: Any, weights: Any):
    return _forward(spec, table, indices, bounds, weights), (table, indices, bounds, weights)


def _outside_to(x: Any, n: int) -> Any:
    """``x`` with every value outside ``[0, n)`` replaced by ``n`` (JAX's indexing would wrap
    negative ones)."""
    return jnp.where((x < 0) | (x >= n), n, x)


def lookup_bags(spec: BagSpec, indices: Any, bounds: Any) -> Any:
    """The bag of every lookup; ``spec.rows`` (outside every bag) where it has none."""
    if not spec.by_offsets:
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


def _bag_sizes(spec: BagSpec, bags: Any, dtype: Any) -> Any:
    ones = jnp.ones(bags.shape, dtype)
    count = jax.ops.segment_sum(ones, bags, num_segments=spec.rows)
    return jnp.maximum(count, 1)[:, None]


def _bwd(spec: BagSpec, res: tuple, cot: Any):
    table, indices, bounds, weights = res
    if spec.combiner in ("max", "min"):
        raise ValueError(f"embedding_bag(combiner={spec.combiner!r}) has no gradient: use "
                         "sum, mean or sqrt_n, or jnp.take + jax.ops.segment_max")
    bags = lookup_bags(spec, indices, bounds)
    if spec.combiner == "mean":
        cot = cot / _bag_sizes(spec, bags, cot.dtype)
    elif spec.combiner == "sqrt_n":
        cot = cot / jnp.sqrt(_bag_sizes(spec, bags, cot.dtype))
    per_lookup = jnp.take(cot, bags, axis=0, mode="fill", fill_value=0)
    idx = effective_indices(spec, table.shape[0], indices)
    d_weights = None
    if weights is not None:
        rows = jnp.take(table, idx, axis=0, mode="fill")       # NaN rows where fill reads none
        # a reduce in the table's type, as the transpose of the weights' broadcast is (jnp.sum
        # would accumulate bf16 in f32)
        d_weights = jax.lax.reduce(rows * per_lookup, jnp.zeros((), rows.dtype), jax.lax.add,
                                   (1,)).astype(weights.dtype)
        per_lookup = per_lookup * weights[:, None]
    zeros = jnp.zeros(table.shape, table.dtype)
    d_table = zeros.at[idx].add(per_lookup.astype(table.dtype), mode="drop")
    return d_table, None, None, d_weights


differentiable_bag.defvjp(_fwd, _bwd)
