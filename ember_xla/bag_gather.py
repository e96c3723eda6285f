"""A padded ``embedding_bag`` of one row per bag (``indices [B, 1]``) as the gather XLA:CPU
makes of the JAX code it replaces. XLA's simplifier folds a reduce over a dimension of size 1
away (``jnp.take(t, ids, axis=0).sum(1)`` of ``[B, 1]`` ids compiles to the gather alone; the
mean's divide by 1 and the square root of 1 fold too), so each bag is its (weighted) row: a
-0.0 stays -0.0, which a kernel adding the row to the init 0 turns into +0.0, and the one
gather fusion is faster than a custom-call's fixed cost (benchmarks/bench_embedding_bag.py,
docs/BENCHMARKS.md). Written as that JAX code (the lookup of ``[B, 1, D]`` rows, the weights'
multiply, the reduce over the bag axis), so jit, vmap and grad are jax's own of the replaced
code. Used only when the init is the combiner's identity, as XLA's fold assumes."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ember_xla.bag_call import BagSpec, effective_indices

#: The init each combiner's reduce starts from in jnp (what XLA's fold takes as the identity).
IDENTITY = {"sum": 0.0, "mean": 0.0, "sqrt_n": 0.0, "max": -math.inf, "min": math.inf}


def is_one_row_bag(spec: BagSpec, table: Any, indices: Any) -> bool:
    """Whether the call is a padded bag of one row each whose init is the identity (on a table
    with rows: jnp.take reads nothing from an empty one, the kernel gives NaN rows)."""
    return (spec.layout == "padded" and indices.shape[1] == 1 and table.shape[0] > 0
            and spec.init == IDENTITY[spec.combiner])


def one_row_bags(spec: BagSpec, table: Any, indices: Any, weights: Any) -> Any:
    """The pooled rows ``[B, D]`` of bags of one row, as the jnp bag computes them: the rows
    read as the call's index mode reads them (clip: clamped; fill: NaN rows where the id is
    outside the table, after the optional wrap of negative ids), times the weights, reduced
    over the bag axis (which XLA:CPU folds away)."""
    if spec.mode == "clip":  # the gather clamps (jnp.take(mode="clip") wraps nothing)
        n = table.shape[0]
        ids = jnp.where(indices < 0, indices + n, indices) if spec.wrap_negative else indices
        rows = jnp.take(table, ids, axis=0, mode="clip")
    else:  # N where no row is read; ids are never negative, so jnp.take wraps none again
        ids = effective_indices(spec, table.shape[0], indices)
        rows = jnp.take(table, ids, axis=0, mode="fill", fill_value=jnp.nan)
    if weights is not None:
        rows = rows * weights[..., None]
    if spec.combiner == "max":
        return rows.max(1)
    if spec.combiner == "min":
        return rows.min(1)
    if spec.combiner == "mean":
        return rows.mean(1)
    total = rows.sum(1)
    return total if spec.combiner == "sum" else total / jnp.sqrt(jnp.ones((), total.dtype))
