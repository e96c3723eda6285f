"""Bags with more lookup dims than [B,P], as JAX users write them: ids ``[B,F,P]`` with
per-feature offsets into one concatenated table (``t[ids + offs[None, :, None]].sum(2)``), a
lookup ``jax.vmap``-ed over stacked tables ``[F,N,D]``, a position-weighted bag
(``(t[ids] * w[None, :, None]).sum(1)``), an SGD training step over the stacked tables, and
one whose lookup is ``jax.vmap``-ed over the table's columns (penzai's named-axis form).
``jax.jit`` vs ``ember_xla.jit`` (default options: the cost model decides) vs torch's
``EmbeddingBag`` (offsets into the concatenated table; ``per_sample_weights`` for the weighted
bag; torch uses all cores).

A benchmark, not a test. Variants interleaved in one process, medians over ``--reps`` runs,
ratios to ``jax.jit``; outputs compared (ember bit for bit with ``jax.jit``, torch to a
tolerance: it adds in its own order).

    python benchmarks/bench_batched_bags.py
    python benchmarks/bench_batched_bags.py --shape 2048,26,20,64,100000 --reps 31
    python benchmarks/bench_batched_bags.py --only columns
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _median_us(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def _jax_pair(f, args):
    import jax

    import ember_xla

    fj, fe = jax.jit(f), ember_xla.jit(f)
    dev = [jax.device_put(a) for a in args]
    want, got = fj(*dev), fe(*dev)
    for a, b in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got),
                    strict=True):
        if np.asarray(a).tobytes() != np.asarray(b).tobytes():
            raise SystemExit("ember_xla.jit differs from jax.jit")
    return (lambda: jax.block_until_ready(fj(*dev))), (lambda: jax.block_until_ready(
        fe(*dev))), np.asarray(jax.tree_util.tree_leaves(want)[0]), fe


def run(b: int, f: int, p: int, d: int, n: int, reps: int, only: str = "") -> None:
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    table = rng.standard_normal((f * n, d)).astype(np.float32)
    ids = rng.integers(0, n, (b, f, p)).astype(np.int32)
    offs = (np.arange(f) * n).astype(np.int32)
    pw = rng.random(p).astype(np.float32)
    y = rng.standard_normal(b).astype(np.float32)
    w_out = rng.standard_normal(f * d).astype(np.float32)

    def offsets_bag(t, i, o):
        return t[i + o[None, :, None]].sum(2)

    def stacked(ts, i):                      # ids [F,B,P]
        return jax.vmap(lambda t, i: t[i].sum(1))(ts, i)

    def weighted(t, i, w):
        return (t[i] * w[None, :, None]).sum(1)

    def train(ts, i, y, w):
        def loss(ts):
            e = stacked(ts, i)
            return jnp.mean((jnp.transpose(e, (1, 0, 2)).reshape(b, -1) @ w - y) ** 2)
        return ts - 0.1 * jax.grad(loss)(ts)

    def train_columns(t, i, y, w):           # one table, ids [B,P], lookup D-first
        def loss(t):
            cols = jax.vmap(lambda c: c[i], in_axes=1, out_axes=0)(t)       # [D,B,P]
            return jnp.mean((jnp.transpose(cols, (1, 2, 0)).sum(1) @ w - y) ** 2)
        return t - 0.1 * jax.grad(loss)(t)

    stack = table.reshape(f, n, d)
    ids_t = np.ascontiguousarray(ids.transpose(1, 0, 2))
    cases = [
        ("[B,F,P] ids + offsets, one table", offsets_bag, [table, ids, offs],
         ("bag", (ids + offs[None, :, None]).reshape(-1, p), None)),
        ("vmap over stacked tables", stacked, [stack, ids_t],
         ("bag", (ids_t + offs[:, None, None]).reshape(-1, p), None)),
        ("position-weighted bag (one feature)", weighted, [table, ids[:, 0], pw],
         ("bag", ids[:, 0], np.broadcast_to(pw, (b, p)))),
        ("SGD step over stacked tables", train, [stack, ids_t, y, w_out], None),
        ("SGD step, lookup vmapped over columns", train_columns,
         [table, ids[:, 0] + offs[1], y, w_out[:d]], None),
    ]
    cases = [c for c in cases if only in c[0]]
    print(f"B={b} F={f} P={p} D={d} rows per table={n}")
    for name, fn, args, torch_case in cases:
        tj, te, want, fe = _jax_pair(fn, args)
        report = next(iter(fe.reports.values()), {})
        variants = {"jax.jit": tj, "ember_xla.jit": te}
        if torch_case is not None:
            variants["torch"] = _torch_bag(table, *torch_case[1:], want.reshape(-1, d))
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(reps):                       # interleaved
            for k, call in variants.items():
                times[k].append(_median_us(call, 1))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratios = ", ".join(f"{k} {v:.0f} us ({med['jax.jit'] / v:.2f}x)" for k, v in med.items())
        kinds = ",".join(sorted({c["kind"] for c in report.get("clusters", [])})) or "none"
        print(f"  {name:38s} {ratios}   [rewritten: {kinds}]")


def _torch_bag(table, flat_ids, weights, want):
    import torch

    bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(table), mode="sum")
    ids = torch.from_numpy(np.ascontiguousarray(flat_ids, np.int64))
    ws = None if weights is None else torch.from_numpy(
        np.ascontiguousarray(weights, np.float32))
    with torch.no_grad():
        got = bag(ids, per_sample_weights=ws).numpy()
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        raise SystemExit("torch differs from jax.jit beyond the tolerance")

    def call():
        with torch.no_grad():
            bag(ids, per_sample_weights=ws)
    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default=None, help="B,F,P,D,rows per table (default: two shapes)")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    a = ap.parse_args()
    shapes = ([tuple(int(x) for x in a.shape.split(","))] if a.shape else
              [(256, 8, 6, 32, 20_000), (2048, 26, 20, 64, 100_000)])
    for s in shapes:
        run(*s, a.reps, a.only)


if __name__ == "__main__":
    main()
