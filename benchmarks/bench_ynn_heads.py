"""Bags under a dense head whose activation XLA:CPU's YNNPACK fusion computes with the bag
(gelu MLP, softmax classifier): the original module vs what ``rewrite_module`` makes of it with
its defaults (cost model on), alternating in one process, medians, outputs compared bit for bit.
A bag is rewritten here only when reading XLA's optimized modules shows the head's inexact ops
stay in a YNNPACK fusion once the bag is a custom call (rewrites/ynn_fusions.py); a benchmark
driver, not a test.

    cd /tmp && python /path/to/benchmarks/bench_ynn_heads.py [--reps 41]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=41, help="alternating rounds per row")
    args = ap.parse_args()
    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    rng = np.random.default_rng(0)
    p, d, h, v = 20, 64, 64, 200_000
    print(f"load average {os.getloadavg()[0]:.2f}; P={p} D={d} H={h}, table {v} rows")
    print("| B | head | clusters | XLA:CPU us | rewritten us | speedup | bit-equal |")
    print("|---:|---|---:|---:|---:|---:|---|")
    bad = 0
    w = (rng.standard_normal((d, h)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(h).astype(np.float32)
    w2 = rng.standard_normal((h, 1)).astype(np.float32)
    heads = {"gelu MLP": lambda t, i: jax.nn.gelu(t[i].mean(1) @ w + bias) @ w2,
             "softmax": lambda t, i: jax.nn.softmax(t[i].sum(1) @ w + bias)}
    t = rng.standard_normal((v, d)).astype(np.float32)
    for b in (256, 2048):
        ids = rng.integers(0, v, (b, p)).astype(np.int32)
        for name, f in heads.items():
            m = from_jax(jax.jit(f), t, ids).module
            r = rewrite_module(m)
            ex = {"xla": compile_module(m)._loaded, "ember": compile_module(r.module)._loaded}
            xs = [jax.device_put(t), jax.device_put(ids)]
            outs = {k: [np.asarray(o) for o in e.execute(xs)] for k, e in ex.items()}
            same = all(a.tobytes() == c.tobytes()
                       for a, c in zip(outs["xla"], outs["ember"], strict=True))
            times: dict[str, list[float]] = {k: [] for k in ex}
            for _ in range(args.reps):
                for k, e in ex.items():
                    t0 = time.perf_counter()
                    for _ in range(20):
                        o = e.execute(xs)
                    jax.block_until_ready(o)
                    times[k].append((time.perf_counter() - t0) / 20)
            med = {k: statistics.median(s) * 1e6 for k, s in times.items()}
            ratio = med["xla"] / med["ember"]
            bad += (not same) or ratio < 1.0
            print(f"| {b} | {name} | {len(r.clusters)} | {med['xla']:.1f} | {med['ember']:.1f} "
                  f"| {ratio:.2f}x | {'yes' if same else 'NO'} |")
    print(f"rows below 1.0x or not bit-equal: {bad}; load average {os.getloadavg()[0]:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
