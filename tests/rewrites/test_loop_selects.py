"""Small padded bags whose loop XLA:CPU vectorizes sooner because it selects rows: jnp.take's
fill (NaN rows for ids out of the table), a padding mask (``jnp.where(mask, rows, 0)``, also
one computed from the ids), both. Every rewritten bag is bit-equal to XLA:CPU under both
settings of ``xla_allow_excess_precision`` on rows near the dtype's maximum (where the order
decides between ±inf and NaN); at the measured limits the bag is rewritten one row before
and kept in XLA one row after."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

FORMS = {  # (function, takes a mask)
    "clamp": (lambda t, i: t[i].sum(1), False),
    "fill": (lambda t, i: jnp.take(t, i, axis=0).sum(1), False),
    "fill0": (lambda t, i: jnp.take(t, i, axis=0, mode="fill", fill_value=0).sum(1), False),
    "mask": (lambda t, i, m: jnp.where(m[..., None], t[i], 0).sum(1), True),
    "mask_zero": (lambda t, i: jnp.where((i != 0)[..., None], t[i], 0).sum(1), False),
    "mask_fill": (lambda t, i, m: jnp.where(m[..., None], jnp.take(t, i, axis=0), 0).sum(1),
                  True),
}
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}
INDEX = {"s32": np.int32, "s64": np.int64}
OPTIONS = {"excess": {}, "no_excess": {"xla_allow_excess_precision": False}}
# (form, rows, ids) -> the last width added row after row; one more row is kept in XLA
LIMITS = {("fill", "f32", "s32"): 21, ("mask", "f32", "s32"): 19,
          ("mask_fill", "f32", "s32"): 17, ("fill", "f32", "s64"): 18,
          ("fill", "bf16", "s32"): 15}


def _args(form, dt, it, b, p, seed):
    rng = np.random.default_rng(seed)
    sign = np.where(rng.random((300, 4)) < 0.5, -1.0, 1.0)
    t = (rng.uniform(0.5, 1.0, (300, 4)) * float(ml_dtypes.finfo(dt).max) * sign)
    args = [t.astype(np.float32).astype(dt), rng.integers(0, 300, (b, p)).astype(it)]
    if FORMS[form][1]:
        args.append(rng.random((b, p)) < 0.8)
    return args


def _same(want, got) -> bool:
    w, g = np.asarray(want).astype(np.float32), np.asarray(got).astype(np.float32)
    return bool(np.array_equal(np.isnan(w), np.isnan(g))
                and np.array_equal(w[~np.isnan(w)], g[~np.isnan(g)]))


@pytest.mark.parametrize("form,dname,iname,opts", list(itertools.product(
    FORMS, DTYPES, INDEX, OPTIONS)))
def test_bits_equal_or_kept(form, dname, iname, opts):
    dt, it = DTYPES[dname], INDEX[iname]
    rewritten = {}
    with jax.enable_x64(iname == "s64"):
        for p in (15, 16, 17, 18, 19, 20, 21, 22, 24, 25):
            args = _args(form, dt, it, 4, p, p)
            m = from_jax(FORMS[form][0], *args).module
            r = rewrite_module(m, cost_model=False, excess_precision=opts == "excess")
            rewritten[p] = bool(r.clusters)
            if not r.clusters:
                assert "order" in str(r.near_misses), r.near_misses
                continue
            for seed in (p, p + 100):
                xs = _args(form, dt, it, 4, p, seed)
                want = run_module(m, xs, OPTIONS[opts])[0]
                got = run_module(r.module, xs, OPTIONS[opts])[0]
                assert _same(want, got), (form, dname, iname, p, r.clusters[0]["attributes"])
    limit = LIMITS.get((form, dname, iname))
    if limit is not None:
        assert rewritten[limit] and not rewritten[limit + 1], rewritten
