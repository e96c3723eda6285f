"""One gather feeding several segment reductions (a PNA/jraph-style multi-aggregator):
XLA:CPU vs the rewrite with one ``ember.multi_segment_reduce`` call vs the rewrite with one
``ember.segment_reduce`` call per reduction (``multi_output=False``).

A benchmark, not a test. The model is ``concatenate([segment_sum(x[src], dst),
segment_max(x[src], dst), segment_min(x[src], dst)])`` (or only sum and max with
``--combiners sum,max``) over V nodes of D features and E edges, uniform random ids (dst
unsorted). All variants run interleaved in one process; medians over ``--reps`` runs, and the
ratios to XLA. Clusters are rewritten whatever the cost model says (it would keep small sizes
in XLA), so the kernels themselves are compared.

    python benchmarks/bench_multi_output.py                  # three sizes, sum+max+min
    python benchmarks/bench_multi_output.py --combiners sum,max --reps 41
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SIZES = [(20_000, 64, 200_000), (200_000, 64, 1_000_000), (1_000_000, 128, 2_000_000)]


def build(v: int, combiners: list[str]):
    import jax
    import jax.numpy as jnp

    ops = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max, "min": jax.ops.segment_min}

    def f(x, src, dst):
        rows = x[src]
        return jnp.concatenate([ops[c](rows, dst, num_segments=v) for c in combiners], 1)

    return f


def variants(f, args):
    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    dev_args = [jax.device_put(a) for a in args]
    jitted = jax.jit(f)
    out = {"xla": lambda: jitted(*dev_args).block_until_ready()}
    module = from_jax(f, *args).module
    for name, multi in (("multi", True), ("separate", False)):
        result = rewrite_module(module, cost_model=False, multi_output=multi)
        calls = [op.attributes["custom_call_target"] for op in result.module.entry.ops
                 if op.opcode == "custom-call"]
        loaded = compile_module(result.module)._loaded

        def run(loaded=loaded):
            for o in loaded.execute(dev_args):
                o.block_until_ready()

        out[name] = run
        print(f"  {name}: {len(result.clusters)} clusters in {calls}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--combiners", default="sum,max,min")
    ap.add_argument("--reps", type=int, default=21)
    a = ap.parse_args()
    combiners = a.combiners.split(",")
    rng = np.random.default_rng(0)
    print(f"combiners {combiners}; medians of {a.reps} interleaved runs (ms)")
    print(f"{'V':>9} {'D':>4} {'E':>9} | {'xla':>8} {'multi':>8} {'separate':>8} | "
          f"{'multi/xla':>9} {'sep/xla':>8} {'multi vs sep':>12}")
    for v, d, e in SIZES:
        x = rng.standard_normal((v, d)).astype(np.float32)
        src = rng.integers(0, v, e).astype(np.int32)
        dst = rng.integers(0, v, e).astype(np.int32)
        runs = variants(build(v, combiners), [x, src, dst])
        times: dict[str, list[float]] = {k: [] for k in runs}
        for fn in runs.values():  # warm up (compile, first-touch)
            fn()
        for _ in range(a.reps):
            for k, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) * 1e3)
        m = {k: statistics.median(t) for k, t in times.items()}
        print(f"{v:>9} {d:>4} {e:>9} | {m['xla']:8.2f} {m['multi']:8.2f} {m['separate']:8.2f} | "
              f"{m['xla'] / m['multi']:8.2f}x {m['xla'] / m['separate']:7.2f}x "
              f"{m['separate'] / m['multi']:11.2f}x")


if __name__ == "__main__":
    main()
