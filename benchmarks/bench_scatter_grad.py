"""The unfused gradient of a row lookup (``ember.scatter_grad``: zeros ``[V,D]`` plus each
update row added at its id, XLA's scatter-add) as a module with its forward lookup exports
it: ``jax.jit`` (XLA:CPU's scatter) vs the rewritten module (``ember_xla.jit`` with the cost
model off, so the cluster is taken) summing by its two strategies -- ``scan`` (each part of
the pool owns a range of result rows and walks the updates in order) and ``grouped`` (the
updates sorted by row once, each row summed in registers and written once) -- vs torch's
``index_add_`` into zeros.

A benchmark, not a test. Variants interleaved in one process, medians over ``--reps`` runs,
ratios to ``jax.jit``; ember's results compared bit for bit with ``jax.jit``'s.

    python benchmarks/bench_scatter_grad.py
    python benchmarks/bench_scatter_grad.py --shapes 100000,200000,64 --reps 51
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ["EMBER_XLA_COST_MODEL"] = "off"   # take the cluster whatever the model predicts

SHAPES = [(1000, 5000, 64), (10000, 100000, 32), (4096, 8192, 512), (100000, 200000, 64)]


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(v: int, n: int, d: int, reps: int) -> None:
    import jax
    import torch

    import ember_xla

    def step(t, i, g):   # a lookup and its transpose: the scatter pairs with the gather
        return t[i][:1], jax.vjp(lambda t: t[i], t)[1](g)[0]

    rng = np.random.default_rng(0)
    args = [jax.device_put(a) for a in (np.zeros((v, d), np.float32),
                                        rng.integers(0, v, n).astype(np.int32),
                                        rng.standard_normal((n, d)).astype(np.float32))]
    fj, fe = jax.jit(step), ember_xla.jit(step)
    want = np.asarray(fj(*args)[1])
    kinds = None

    def ember(strategy):
        def call():
            os.environ["EMBER_XLA_SCATTER_GRAD"] = strategy
            jax.block_until_ready(fe(*args))
        return call

    for strategy in ("scan", "grouped"):
        ember(strategy)()
        if np.asarray(fe(*args)[1]).tobytes() != want.tobytes():
            raise SystemExit(f"ember ({strategy}) differs from jax.jit")
        kinds = [c["kind"] for c in next(iter(fe.reports.values()), {}).get("clusters", [])]
    ids_t = torch.from_numpy(np.asarray(args[1]).astype(np.int64))
    upd_t = torch.from_numpy(np.array(args[2]))

    def torch_add():
        torch.zeros((v, d)).index_add_(0, ids_t, upd_t)

    variants = {"jax.jit": lambda: jax.block_until_ready(fj(*args)),
                "ember scan": ember("scan"), "ember grouped": ember("grouped"),
                "torch index_add_": torch_add}
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for k, call in variants.items():
            times[k].append(_once(call))
    os.environ.pop("EMBER_XLA_SCATTER_GRAD", None)
    med = {k: statistics.median(x) * 1e6 for k, x in times.items()}
    line = ", ".join(f"{k} {t:.0f} us ({med['jax.jit'] / t:.2f}x)" for k, t in med.items())
    print(f"V={v} L={n} D={d} [rewritten: {','.join(kinds or ['none'])}]: {line}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=None, help="V,L,D[;V,L,D...] (default: four shapes)")
    ap.add_argument("--reps", type=int, default=51)
    a = ap.parse_args()
    shapes = ([tuple(int(x) for x in s.split(",")) for s in a.shapes.split(";")]
              if a.shapes else SHAPES)
    print(f"{torch_threads()} torch threads; ember's pool is XLA's")
    for s in shapes:
        run(*s, a.reps)


def torch_threads() -> int:
    import torch
    return torch.get_num_threads()


if __name__ == "__main__":
    main()
