"""Hypothesis-driven differential test: random embedding-bag programs written in plain JAX
(segment and padded `[B, P]` bags; shapes, table dtypes, index dtypes, lookup modes, combiners,
weights, rows scaled by one number (a literal or an argument), sortedness, bag lengths
including 0, out-of-range and negative indices, dropped segment ids; table values of unit scale
or near the dtype's maximum, so that sums overflow and the order of additions decides between
+-inf and NaN) are exported, rewritten, and run original vs rewritten on XLA:CPU: outputs must
be bitwise equal (NaN positions equal). A padded bag whose summation order (max/min: NaN
semantics) XLA:CPU does not let the kernel reproduce may stay in XLA, with that reason.
The slow variant (`-m slow`) draws 1,000 programs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from training_steps import same_bits

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
SCALE = 2.8284271  # sqrt(8), as token embeddings are scaled


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
    # rows times one number (emb * sqrt(D)): a literal or an argument
    scale = draw(st.sampled_from(["none", "literal", "argument"])) if (
        combiner in ("sum", "mean") and not weighted) else "none"
    sorted_ids = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    padded = draw(st.booleans())
    width = draw(st.integers(1, 40))  # P of a padded bag
    near_max = draw(st.booleans())
    return dict(n=n, d=d, s=s, lengths=lengths, lookup=lookup, combiner=combiner, dtype=dtype,
                idx64=idx64, weighted=weighted, scale=scale, sorted_ids=sorted_ids, seed=seed,
                padded=padded, width=width, near_max=near_max)


def _values(rng, shape, dt, near_max: bool):
    """Unit-scale normal values, or values of random sign between 0.3 and 1.0 times the dtype's
    largest finite value (a few rows of them overflow any sum); a tenth of them -0.0 (a bag of
    -0.0 rows sums to -0.0 only if nothing adds a +0.0 init)."""
    if not near_max:
        x = rng.standard_normal(shape)
    else:
        top = float(ml_dtypes.finfo(dt).max)
        mag = rng.uniform(0.3, 1.0, shape) * top
        x = np.where(rng.random(shape) < 0.5, -mag, mag)
    return np.where(rng.random(shape) < 0.1, -0.0, x).astype(dt)


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
        if p["scale"] == "literal":
            rows = rows * jnp.asarray(SCALE, rows.dtype)
        elif p["scale"] == "argument":
            rows = rows * w[0]
        elif w:
            rows = rows * w[0][..., None]
        if p["padded"]:
            if p["combiner"] in ("max", "min"):  # XLA:CPU's max/min semantics (padded_minmax.h)
                return getattr(rows, p["combiner"])(1)
            return rows.mean(1) if p["combiner"] == "mean" else rows.sum(1)
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
    table = _values(rng, (p["n"], p["d"]), dt, p["near_max"])
    shape = (p["s"], p["width"]) if p["padded"] else (L,)
    idx = rng.integers(-p["n"] - 3, p["n"] + 3, size=shape).astype(it)  # incl. OOB, negative
    scale = [np.asarray(SCALE, dt)] if p["scale"] == "argument" else []
    if p["padded"]:
        args = [table, idx] + scale
        if p["weighted"]:
            args.append(rng.standard_normal(shape).astype(dt))
        return (lambda table, idx, *w: fn(table, idx, None, *w)), args
    seg = np.repeat(np.arange(p["s"]), p["lengths"]).astype(it)
    if L and not p["sorted_ids"]:
        seg = rng.permutation(seg)
        seg[rng.random(L) < 0.1] = p["s"] + 1  # dropped by scatter
    args = [table, idx, seg] + scale
    if p["weighted"]:
        args.append(rng.standard_normal(L).astype(dt))
    return fn, args


def _check(p):
    import jax

    fn, args = build(p)
    with jax.enable_x64(p["idx64"]):
        model = from_jax(fn, *args)
    result = rewrite_module(model.module)
    if not p["padded"] and sum(p["lengths"]) == 0:
        return  # JAX folds an empty lookup away: nothing to rewrite is fine
    if not p["padded"] and sum(p["lengths"]) == 1 and p["combiner"] in ("sum", "mean"):
        reasons = " ".join(str(m) for m in result.near_misses)  # XLA folds it into a copy
        assert not result.clusters and "one row to zeros" in reasons, result.near_misses
        return
    if p["padded"] and not result.clusters:  # kept in XLA: only for a stated order reason
        reasons = " ".join(str(m) for m in result.near_misses)  # (a bag of one row: no adds)
        words = ("order", "of one row") + (("stays in XLA",) if p["combiner"] in ("max", "min")
                                            else ())
        assert any(w in reasons for w in words), (p, result.near_misses)
        return
    assert len(result.clusters) == 1, result.near_misses
    want = run_module(model.module, args)
    got = run_module(result.module, args)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert same_bits(a, b), (p, a, b)  # the sign of a zero too, NaN positions


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_embedding_programs(p):
    _check(p)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_embedding_programs_many(p):
    _check(p)
