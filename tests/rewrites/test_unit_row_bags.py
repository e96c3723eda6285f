"""Bags of one-value rows (D = 1: a factorization machine's or a wide model's first-order
weights) in the forms models write them are rewritten where the kernel adds the values in
XLA:CPU's order, bit-equal under both settings of ``xla_allow_excess_precision``, on values
near the type's maximum (where the order decides between ±inf and NaN) and on ordinary ones;
the others stay in XLA with a reason naming the order (past its row-after-row limits XLA:CPU's
loop is vectorized, not reproduced for one-value rows; YNNPACK adds them in 16 interleaved
sums)."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

FORMS = {  # (function, how the ids are looked up: jnp.take's fill or t[ids]'s clamp)
    "sum(1)": (lambda t, i: jnp.take(t, i, axis=0).sum(1), "fill"),
    "sum((1, 2))": (lambda t, i: jnp.take(t, i, axis=0).sum((1, 2)), "fill"),
    "[..., 0].sum(1)": (lambda t, i: t[i][..., 0].sum(1), "clamp"),
    "mean((1, 2))": (lambda t, i: t[i].mean((1, 2)), "clamp"),
}
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
# XLA's own loop (< 4096 values) adds the rows one after the other up to these many (jnp.take's
# fill select vectorizes it sooner), vectorized past it (kept: not reproduced for one-value
# rows) until its tree windows from 33 rows; YNNPACK from 4096 values: two rows added as one,
# more in 16 interleaved sums (kept)
SEQUENTIAL = {("f32", "fill"): 21, ("f32", "clamp"): 24, ("bf16", "fill"): 15,
              ("bf16", "clamp"): 18}
SHAPES = [(1, 15), (1, 16), (4, 18), (1, 21), (4, 22), (1, 23), (16, 40), (256, 12),
          (2048, 2), (256, 16), (128, 300)]
OPTIONS = {"excess": {}, "no_excess": {"xla_allow_excess_precision": False}}


def _inputs(dt, b: int, p: int, near_max: bool, seed: int):
    rng = np.random.default_rng(seed)
    if near_max:
        sign = np.where(rng.random((1000, 1)) < 0.5, -1.0, 1.0)
        t = rng.uniform(0.5, 1.0, (1000, 1)) * float(np.finfo(dt).max) * sign
    else:
        t = rng.standard_normal((1000, 1)) * np.exp(rng.uniform(-8, 8, (1000, 1)))
    return [t.astype(np.float32).astype(dt), rng.integers(0, 1000, (b, p)).astype(np.int32)]


def _same(want: np.ndarray, got: np.ndarray) -> bool:
    w, g = want.astype(np.float32), got.astype(np.float32)
    fin = ~np.isnan(w)
    return bool(np.array_equal(np.isnan(w), np.isnan(g))
                and np.array_equal(w[fin].view(np.uint32), g[fin].view(np.uint32)))


@pytest.mark.parametrize("form,dname,shape,opts", [
    pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2][0]}x{c[2][1]}-{c[3]}")
    for c in itertools.product(FORMS, DTYPES, SHAPES, OPTIONS)])
def test_bits_equal_or_kept(form, dname, shape, opts):
    b, p = shape
    dt = DTYPES[dname]
    args = _inputs(dt, b, p, near_max=True, seed=p)
    fn, mode = FORMS[form]
    m = from_jax(fn, *args).module
    r = rewrite_module(m, cost_model=False, excess_precision=opts == "excess")
    rewritten = (p <= 2 or p >= 33 or p <= SEQUENTIAL[dname, mode]) if b * p < 4096 \
        else p <= 2
    assert bool(r.clusters) == rewritten, r.near_misses
    if not rewritten:
        reasons = " ".join(str(n.get("reason", "")) for n in r.near_misses)
        assert "order" in reasons, reasons
        return
    for near_max, seed in ((True, p), (True, p + 1), (False, p + 2)):
        xs = _inputs(dt, b, p, near_max, seed)
        want = np.asarray(run_module(m, xs, OPTIONS[opts])[0])
        got = np.asarray(run_module(r.module, xs, OPTIONS[opts])[0])
        assert want.shape == got.shape and _same(want, got), (form, near_max)


WEIGHTED = {  # first-order terms with feature values (v) or a padding mask (m)
    "(w[ids][..., 0] * v).sum(1)": (lambda t, i, v: (t[i][..., 0] * v).sum(1), "v"),
    "(w[ids] * v[..., None]).sum((1, 2))": (
        lambda t, i, v: (t[i] * v[..., None]).sum((1, 2)), "v"),
    "einsum('bf,bf->b')": (lambda t, i, v: jnp.einsum("bf,bf->b", t[i][..., 0], v), "v"),
    "where(mask, w[ids][..., 0], 0).sum(1)": (
        lambda t, i, m: jnp.where(m, jnp.take(t, i, axis=0)[..., 0], 0).sum(1), "m"),
}


@pytest.mark.parametrize("form,opts", list(itertools.product(WEIGHTED, OPTIONS)))
def test_weighted_and_masked_bits_equal_or_kept(form, opts):
    """Each form is rewritten at some size, bit-equal, and kept with a reason at the others."""
    fn, extra = WEIGHTED[form]
    rewritten = 0
    for b, p in ((1, 8), (4, 15), (16, 20), (256, 12), (512, 16)):
        rng = np.random.default_rng(p)
        xs = [*_inputs(np.float32, b, p, near_max=True, seed=p),
              rng.uniform(0.5, 1.0, (b, p)).astype(np.float32) if extra == "v"
              else rng.random((b, p)) < 0.7]
        m = from_jax(fn, *xs).module
        r = rewrite_module(m, cost_model=False, excess_precision=opts == "excess")
        if not r.clusters:
            reasons = " ".join(str(n.get("reason", "")) for n in r.near_misses)
            assert "order" in reasons or "dot" in reasons, (form, b, p, reasons)
            continue
        rewritten += 1
        want = np.asarray(run_module(m, xs, OPTIONS[opts])[0])
        got = np.asarray(run_module(r.module, xs, OPTIONS[opts])[0])
        assert want.shape == got.shape and _same(want, got), (form, b, p)
    assert rewritten, form
