"""The per-call cost decision on the 8-table DLRM-style model (D=16, tables of 50,000 .. 10
rows, pooling 20,10,5,3,2,1,1,1, concatenated): XLA:CPU against every cluster in one grouped
call, every cluster as separate calls, and the default rewrite (the decision of
rewrites/call_plan.py), alternating in one process, medians; prints the decision and its
predicted times.

    python benchmarks/bench_call_decision.py --batch 256 --reps 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROWS = (50_000, 20_000, 10_000, 5_000, 1_000, 500, 100, 10)
POOLING = (20, 10, 5, 3, 2, 1, 1, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    b, k = args.batch, len(ROWS)

    def f(*a):
        return jnp.concatenate([jax.ops.segment_sum(jnp.take(a[j], a[k + j], axis=0),
                                                    a[2 * k + j], num_segments=b)
                                for j in range(k)], axis=1)

    rng = np.random.default_rng(0)
    inputs = ([rng.standard_normal((n, 16), dtype=np.float32) for n in ROWS]
              + [rng.integers(0, n, b * q, dtype=np.int32) for n, q in zip(ROWS, POOLING,
                                                                          strict=True)]
              + [np.repeat(np.arange(b, dtype=np.int32), q) for q in POOLING])
    module = from_jax(f, *inputs).module
    default = rewrite_module(module, cost_model=True)
    for g in default.groups:
        print(f"decision: {g.get('decision')} call of {len(g['members'])} tables, predicted "
              f"{g.get('predicted_us')}")
    kept = [n for n in default.near_misses if n.get("kept_in_xla")]
    print(f"{len(default.clusters)} clusters rewritten, {len(kept)} kept in XLA")
    modules = {"XLA:CPU": module,
               "all grouped (cost_model=False)": rewrite_module(module, cost_model=False).module,
               "all separate (cost_model=False, group=False)":
                   rewrite_module(module, cost_model=False, group=False).module,
               "default (decided per call)": default.module}
    exes = {n: compile_module(m)._loaded for n, m in modules.items()}
    dev = [jax.device_put(x) for x in inputs]
    want = np.asarray(exes["XLA:CPU"].execute(dev)[0])
    for n, e in exes.items():
        if not np.array_equal(np.asarray(e.execute(dev)[0]), want):
            raise SystemExit(f"{n}: differs from XLA:CPU")
    times: dict[str, list[float]] = {n: [] for n in exes}
    for _ in range(args.reps):
        for n, e in exes.items():
            t = time.perf_counter()
            jax.block_until_ready(e.execute(dev))
            times[n].append(time.perf_counter() - t)
    x = statistics.median(times["XLA:CPU"])
    print(f"B={b}, {args.reps} alternating runs, medians; load average {os.getloadavg()[0]:.2f}")
    print("| variant | us | vs XLA:CPU |\n|---|---:|---:|")
    for n, v in times.items():
        print(f"| {n} | {statistics.median(v) * 1e6:.1f} | {x / statistics.median(v):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
