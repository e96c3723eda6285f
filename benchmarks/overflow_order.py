"""Where XLA:CPU's summation order decides between ±inf and NaN: rows with values near the
dtype's maximum (|x| in [0.5, 1) x max, random signs), summed by every sum-like cluster kind,
original vs rewritten on XLA:CPU. Prints, per kind, dtype and shape, how many outputs are NaN
in XLA and in the rewrite and how many differ in NaN position or in their ±inf value, and the
order that reproduces XLA's padded sums (k chunks of c consecutive rows summed first).

    python benchmarks/overflow_order.py        # numbers in docs/RELIABILITY.md
"""

from __future__ import annotations

import itertools

import jax
import ml_dtypes
import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
SHAPES = [(40, 8, 16, 5), (100, 16, 16, 16), (100, 16, 16, 40), (5000, 64, 512, 40),
          (1000, 32, 256, 20)]


def _kinds():
    """name -> (function, the arguments it takes of table, ids, segment ids, weights)."""
    def padded_sum(t, i):
        return t[i].sum(1)

    def padded_mean(t, i):
        return t[i].mean(1)

    def padded_weighted_sum(t, i, w):
        return (t[i] * w[..., None]).sum(1)

    def segment_sum(t, i, s):
        return jax.ops.segment_sum(t[i.reshape(-1)], s.reshape(-1), num_segments=i.shape[0])

    return {"padded sum": (padded_sum, "ti"), "padded mean": (padded_mean, "ti"),
            "padded weighted sum": (padded_weighted_sum, "tiw"),
            "segment sum": (segment_sum, "tis")}


def _differ(a: np.ndarray, b: np.ndarray) -> int:
    """Outputs whose NaN-ness differs, or that are infinite in one and not equal in both."""
    na, nb = np.isnan(a), np.isnan(b)
    inf = (np.isinf(a) | np.isinf(b)) & ~na & ~nb
    return int((na != nb).sum() + (inf & (a != b)).sum())


def _chunk_order(rows: np.ndarray, want: np.ndarray) -> str:
    """The chunk size c (L/c partial sums of c consecutive rows, then summed in order) whose
    float32 result matches XLA's padded sum everywhere, if any."""
    b, ln, d = rows.shape
    hits = []
    with np.errstate(all="ignore"):
        for c in range(1, ln + 1):
            if ln % c:
                continue
            part = np.zeros((b, ln // c, d), np.float32)
            for j in range(c):
                part = part + rows.reshape(b, ln // c, c, d)[:, :, j]
            s = part[:, 0].copy()
            for j in range(1, ln // c):
                s = s + part[:, j]
            if _differ(s, want) == 0:
                hits.append(c)
    return "sequential" if 1 in hits else (f"chunks of {hits[0]}" if hits else "none found")


def main() -> None:
    print("kind | dtype | N,D,B,L | outputs | NaN in XLA | NaN in rewrite | differ | XLA order")
    for (name, (fn, takes)), (dname, dt), (n, d, b, ln) in itertools.product(
            _kinds().items(), DTYPES.items(), SHAPES):
        rng = np.random.default_rng(0)
        fmax = float(np.finfo(dt).max)
        sign = np.where(rng.random((n, d)) < 0.5, -1.0, 1.0)
        t = (rng.uniform(0.5, 1.0, (n, d)) * fmax * sign).astype(np.float32).astype(dt)
        ids = rng.integers(0, n, (b, ln)).astype(np.int32)
        seg = np.sort(rng.integers(0, b, (b, ln)).reshape(-1)).reshape(b, ln).astype(np.int32)
        w = rng.uniform(0.5, 1.0, (b, ln)).astype(dt)
        args = [{"t": t, "i": ids, "s": seg, "w": w}[k] for k in takes]
        m = from_jax(fn, *args)
        r = rewrite_module(m.module, cost_model=False)
        want = run_module(m.module, args)[0].astype(np.float32)
        got = run_module(r.module, args)[0].astype(np.float32)
        order = (_chunk_order(t[ids].astype(np.float32), want)
                 if name == "padded sum" and dname == "f32" else "")
        print(f"{name} | {dname} | {n},{d},{b},{ln} | {want.size} | {int(np.isnan(want).sum())}"
              f" | {int(np.isnan(got).sum())} | {_differ(want, got)} | {order}"
              f"{'' if r.clusters else ' (not rewritten)'}", flush=True)


if __name__ == "__main__":
    main()
