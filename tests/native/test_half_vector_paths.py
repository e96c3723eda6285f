"""The kernels' vector paths for half-precision rows -- the blocked sum widening 8 bf16 (shift)
or f16 (F16C) values at a time, the AVX2 reduce clone adding f16 rows through F16C (and
rounding each f16 sum with it) -- give
XLA:CPU's bits on rows full of special values: NaNs with payloads and signs, infinities, signed
zeros, f16 subnormals, values near the type's maximum; with out-of-range ids (jnp.take's NaN
fill, XLA's clamp), masked lookups, and D both a multiple of 8 and not (the scalar tail). As
in test_kernels.py, NaN positions are compared, not NaN signs and payloads (which NaN of a bag
survives depends on how XLA associates the adds)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

_BITS = {  # (quiet NaNs with payloads and both signs, signalling NaN, +-inf, +-0, tiny, max)
    "bf16": [0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x8003, 0x7F7F,
             0xFF7F],
    "f16": [0x7E00, 0xFE01, 0x7C01, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF,
            0xFBFF],
}
_DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _table(dt: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    t = rng.standard_normal((n, d)).astype(_DTYPES[dt])
    special = np.array(_BITS[dt], np.uint16).view(_DTYPES[dt])
    u = rng.random((n, d))
    return np.where(u < 0.3, rng.choice(special, (n, d)), t).astype(_DTYPES[dt])


_FORMS = {
    "sum": lambda t, i: t[i].sum(1),
    "mean": lambda t, i: t[i].mean(1),
    "take_fill": lambda t, i: jnp.take(t, i, axis=0).sum(1),
    "masked": lambda t, i: jnp.where((i % 3 != 0)[..., None], t[i], 0).sum(1),
    # a scatter-add in the table's type: each add rounded to it (f16: F16C's vcvtps2ph)
    "segment_sum": lambda t, i: jax.ops.segment_sum(
        t[i.reshape(-1)], jnp.repeat(jnp.arange(i.shape[0]), i.shape[1]),
        num_segments=i.shape[0]),
}


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("form", list(_FORMS))
@pytest.mark.parametrize("b,p,d", [(64, 8, 16), (32, 4, 24), (16, 16, 64), (8, 3, 12),
                                   (128, 8, 40)])
def test_half_bags_equal_xla_bit_for_bit(dt, form, b, p, d):
    rng = np.random.default_rng(b * 100 + p * 10 + d)
    n = 50
    table = _table(dt, n, d, rng)
    ids = rng.integers(-n - 5, n + 5, (b, p)).astype(np.int32)   # negative and past the end
    args = [table, ids]
    m = from_jax(jax.jit(_FORMS[form]), *args).module
    r = rewrite_module(m, cost_model=False)
    if not r.clusters:   # an order XLA:CPU uses that no kernel reproduces: named, kept
        assert r.near_misses
        return
    for opts in ({}, {"xla_allow_excess_precision": False}):
        got, want = run_module(r.module, args, opts)[0], run_module(m, args, opts)[0]
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan), (dt, form, opts)
        assert got[~nan].tobytes() == want[~nan].tobytes(), (dt, form, opts)
