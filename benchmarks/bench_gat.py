"""A graph attention layer (``jraph.GAT``) whose gathered sender features feed both the
attention logits and the softmax-weighted messages: ``jax.jit`` vs ``ember_xla.jit`` (default
options: the cost model decides) vs the same layer in torch (``index_select``,
``scatter_reduce(amax)``, ``index_add_``, what a PyTorch user writes without PyG, on all
cores).

A benchmark, not a test. V nodes of D features, E edges with uniform random senders and
receivers sorted (jraph's usual layout); the logit is a leaky-relu of the dot product of the
sender's and receiver's features. The message sum is rewritten on its own copy of the lookup
(split-shared-lookup); the segment softmax stays in XLA. Variants interleaved in one process,
medians over ``--reps`` runs, ratios to ``jax.jit``; the outputs are compared (ember bit for bit
with ``jax.jit``; torch to a tolerance, as it adds in its own order).

    python benchmarks/bench_gat.py
    python benchmarks/bench_gat.py --sizes 20000,64,200000 --reps 41
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SIZES = [(2_000, 32, 20_000), (20_000, 64, 200_000), (100_000, 64, 1_000_000)]


def build(v: int, e: int):
    import jax
    import jax.numpy as jnp
    import jraph

    def logit(sent, received, edges):
        return jax.nn.leaky_relu(jnp.sum(sent * received, axis=-1, keepdims=True))

    def f(x, senders, receivers):
        g = jraph.GraphsTuple(nodes=x, edges=None, senders=senders, receivers=receivers,
                              n_node=jnp.array([v]), n_edge=jnp.array([e]), globals=None)
        return jraph.GAT(lambda n: n, logit)(g).nodes

    return f


def torch_gat(x, src, dst, v: int):
    import torch

    sent, recv = x.index_select(0, src), x.index_select(0, dst)
    logits = torch.nn.functional.leaky_relu((sent * recv).sum(-1, keepdim=True), 0.01)
    mx = torch.full((v, 1), -torch.inf).scatter_reduce(0, dst[:, None], logits, "amax")
    ex = torch.exp(logits - mx.index_select(0, dst))
    den = torch.zeros(v, 1).index_add_(0, dst, ex)
    w = ex / den.index_select(0, dst)
    out = torch.zeros(v, x.shape[1]).index_add_(0, dst, sent * w)
    return torch.nn.functional.leaky_relu(out, 0.01)  # jraph.GAT's default node update


def _time_us(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e6


def measure(v: int, d: int, e: int, reps: int) -> str:
    """One row of the table: the three variants interleaved, medians and ratios."""
    import jax
    import torch

    import ember_xla

    rng = np.random.default_rng(0)
    x = rng.standard_normal((v, d)).astype(np.float32)
    src = rng.integers(0, v, e).astype(np.int32)
    dst = np.sort(rng.integers(0, v, e)).astype(np.int32)
    f = build(v, e)
    args = [jax.device_put(t) for t in (x, src, dst)]
    fj, fe = jax.jit(f), ember_xla.jit(f)
    want, got = np.asarray(fj(*args)), np.asarray(fe(*args))
    (report,) = fe.reports.values()
    tx, ts, td = torch.from_numpy(x), torch.from_numpy(src).long(), torch.from_numpy(dst).long()
    close = np.allclose(torch_gat(tx, ts, td, v).numpy(), want, rtol=1e-4, atol=1e-5)
    runs = {"jax": lambda: fj(*args).block_until_ready(),
            "ember": lambda: fe(*args).block_until_ready(),
            "torch": lambda: torch_gat(tx, ts, td, v)}
    t: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(reps + 1):
        for k, fn in runs.items():
            t[k].append(_time_us(fn))
    m = {k: statistics.median(vs[1:]) for k, vs in t.items()}
    return (f"{v:>8} {d:>4} {e:>9} {len(report['clusters']):>5} {m['jax']:>10.0f} "
            f"{m['ember']:>10.0f} {m['torch']:>10.0f} {m['jax'] / m['ember']:>8.2f}x "
            f"{m['torch'] / m['ember']:>10.2f}x  ember==jax bitwise: "
            f"{want.tobytes() == got.tobytes()}, torch close: {close}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", help="V,D,E triples")
    ap.add_argument("--reps", type=int, default=21)
    a = ap.parse_args()
    sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes] if a.sizes else SIZES
    print(f"{'V':>8} {'D':>4} {'E':>9} {'calls':>5} {'jax us':>10} {'ember us':>10} "
          f"{'torch us':>10} {'ember/jax':>9} {'ember/torch':>11}  outputs")
    for v, d, e in sizes:
        print(measure(v, d, e, a.reps), flush=True)


if __name__ == "__main__":
    main()
