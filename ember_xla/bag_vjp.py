"""The VJP of ``ember_xla.embedding_bag``: a ``jax.custom_vjp`` around the native forward call
whose backward is written in JAX ops, in the order XLA's own autodiff of the equivalent
``jnp.take`` + segment reduction computes it, so both give the same floats:

- cotangent of the pooled rows: ``cot / count`` (mean) or ``cot / sqrt(count)`` (sqrt_n), count
  at least 1, then gathered per lookup by its bag (0 for lookups outside every bag); for padded
  ``[B, P]`` bags divided by P and broadcast over the bag axis, as the transpose of
  ``.mean(1)`` / ``.sum(1)`` is;
- times the lookup's weight; then a scatter-add into a zero ``[N, D]`` table at the clamped
  index (``clip``) or dropping indices outside ``[0, N)`` (``fill``);
- the weights' cotangent: ``sum_d(rows * per-lookup cotangent)`` with the looked-up rows.

max and min bags have no VJP here (JAX's gradient of a segment max shares it among tied
lookups by a rule not reproduced here): ``jax.grad`` reaching one raises a ValueError.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from ember_xla.bag_call import BagSpec, bag_call, effective_indices, lookup_bags


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def differentiable_bag(spec: BagSpec, table: Any, indices: Any, bounds: Any,
                       weights: Any) -> Any:
    """``bag_call`` with a VJP for the table (and the weights, when given)."""
    return bag_call(spec, table, indices, bounds, weights)


def _fwd(spec: BagSpec, table: Any, indices: Any, bounds: Any, weights: Any):
    return bag_call(spec, table, indices, bounds, weights), (table, indices, bounds, weights)


def _bag_sizes(spec: BagSpec, bags: Any, dtype: Any) -> Any:
    ones = jnp.ones(bags.shape, dtype)
    count = jax.ops.segment_sum(ones, bags, num_segments=spec.rows)
    return jnp.maximum(count, 1)[:, None]


def _per_lookup(spec: BagSpec, indices: Any, bounds: Any, cot: Any) -> Any:
    """The cotangent of every lookup, ``[L, D]`` (``[B * P, D]`` for padded bags): the pooled
    cotangent divided by the bag size (mean, sqrt_n), taken by the lookup's bag."""
    if spec.layout == "padded":
        size = jnp.full((), max(indices.shape[1], 1), cot.dtype)
        if spec.combiner != "sum":
            cot = cot / (size if spec.combiner == "mean" else jnp.sqrt(size))
        return jnp.broadcast_to(cot[:, None, :], (*indices.shape, cot.shape[1])).reshape(
            -1, cot.shape[1])
    bags = lookup_bags(spec, indices, bounds)
    if spec.combiner == "mean":
        cot = cot / _bag_sizes(spec, bags, cot.dtype)
    elif spec.combiner == "sqrt_n":
        cot = cot / jnp.sqrt(_bag_sizes(spec, bags, cot.dtype))
    return jnp.take(cot, bags, axis=0, mode="fill", fill_value=0)


def _bwd(spec: BagSpec, res: tuple, cot: Any):
    table, indices, bounds, weights = res
    if spec.combiner in ("max", "min"):
        raise ValueError(f"embedding_bag(combiner={spec.combiner!r}) has no gradient: use "
                         "sum, mean or sqrt_n, or jnp.take + jax.ops.segment_max")
    per_lookup = _per_lookup(spec, indices, bounds, cot)
    idx = effective_indices(spec, table.shape[0], indices.reshape(-1))
    d_weights = None
    if weights is not None:
        rows = jnp.take(table, idx, axis=0, mode="fill")       # NaN rows where fill reads none
        # a reduce in the table's type, as the transpose of the weights' broadcast is (jnp.sum
        # would accumulate bf16 in f32)
        d_weights = jax.lax.reduce(rows * per_lookup, jnp.zeros((), rows.dtype), jax.lax.add,
                                   (1,)).astype(weights.dtype).reshape(weights.shape)
        per_lookup = per_lookup * weights.reshape(-1)[:, None]
    zeros = jnp.zeros(table.shape, table.dtype)
    d_table = zeros.at[idx].add(per_lookup.astype(table.dtype), mode="drop")
    return d_table, None, None, d_weights


differentiable_bag.defvjp(_fwd, _bwd)
