"""Hypothesis-driven differential test: random embedding-bag programs written in plain JAX
(shapes, table dtypes, index dtypes, lookup modes, combiners, weights, sortedness, bag lengths
including 0, out-of-range and negative indices, dropped segment ids) are exported, rewritten,
and run original vs rewritten on XLA:CPU: outputs must be bitwise equal."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@st.composite
def programs(draw):
    n = draw(st.integers(1, 40))
    d = draw(st.sampled_from([1, 3, 8, 16]))
    s = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(0, 6), min_size=s, max_size=s))
    lookup = draw(st.sampled_from(["take_fill", "take_clip", "index"]))
    combiner = draw(st.sampled_from(["sum", "max", "min", "mean"]))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    idx64 = draw(st.booleans())
    weighted = combiner in ("sum", "mean") and draw(st.booleans())
    sorted_ids = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    return dict(n=n, d=d, s=s, lengths=lengths, lookup=lookup, combiner=combiner, dtype=dtype,
                idx64=idx64, weighted=weighted, sorted_ids=sorted_ids, seed=seed)


def build(p):
    import jax
    import jax.numpy as jnp

    def fn(table, idx, seg, *w):
        if p["lookup"] == "take_fill":
            rows = jnp.take(table, idx, axis=0)
        elif p["lookup"] == "take_clip":
            rows = jnp.take(table, idx, axis=0, mode="clip")
        else:
            rows = table[idx]
        if w:
            rows = rows * w[0][:, None]
        kw = dict(num_segments=p["s"], indices_are_sorted=p["sorted_ids"])
        if p["combiner"] == "mean":  # how users write a segment mean in JAX
            total = jax.ops.segment_sum(rows, seg, **kw)
            count = jax.ops.segment_sum(jnp.ones_like(seg, dtype=rows.dtype), seg, **kw)
            return total / jnp.maximum(count, 1)[:, None]
        op = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max,
              "min": jax.ops.segment_min}[p["combiner"]]
        return op(rows, seg, **kw)

    rng = np.random.default_rng(p["seed"])
    dt = DTYPES[p["dtype"]]
    it = np.int64 if p["idx64"] else np.int32
    L = int(sum(p["lengths"]))
    table = rng.standard_normal((p["n"], p["d"])).astype(dt)
    idx = rng.integers(-p["n"] - 3, p["n"] + 3, size=L).astype(it)  # incl. OOB and negative
    seg = np.repeat(np.arange(p["s"]), p["lengths"]).astype(it)
    if L and not p["sorted_ids"]:
        seg = rng.permutation(seg)
        seg[rng.random(L) < 0.1] = p["s"] + 1  # dropped by scatter
    args = [table, idx, seg]
    if p["weighted"]:
        args.append(rng.standard_normal(L).astype(dt))
    return fn, args


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_embedding_programs(p):
    import jax

    fn, args = build(p)
    with jax.enable_x64(p["idx64"]):
        model = from_jax(fn, *args)
    result = rewrite_module(model.module)
    if sum(p["lengths"]) == 0:
        return  # JAX folds an empty lookup away: nothing to rewrite is fine
    assert len(result.clusters) == 1, result.near_misses
    want = run_module(model.module, args)
    got = run_module(result.module, args)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True), (p, a, b)
