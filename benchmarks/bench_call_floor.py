"""The fixed cost of an ember call against its physical floor, side by side in one process.

For a two-lookup segment sum (B=1, P=2, D=16; one lookup XLA folds into a copy, which
stays in XLA) and for 8 such tables in one grouped
concatenating call, it times, alternating, medians and minima of ``--reps`` samples:
  xla     XLA:CPU's own module for the cluster(s);
  empty   the rewritten module with the call's target replaced by ``EmberEmptyHandler``
          (native/empty_handler.cc: bound like our handlers, does nothing): the floor of a
          typed-FFI custom-call in an XLA:CPU module (argument/attribute decoding, the thunk);
  ember   the rewritten module as ``rewrite_module`` writes it (the real kernel);
  module  a module that adds 1 to one s32 (what any execution costs).
``ember - empty`` is what our handler adds over the floor (checks, plan, the work itself).

    python benchmarks/bench_call_floor.py --reps 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

EMPTY = "ember_bench.empty"


def _modules(k: int):
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    def f(*a):
        outs = [jax.ops.segment_sum(jnp.take(a[j], a[k + j], axis=0), a[2 * k + j],
                                    num_segments=1) for j in range(k)]
        return outs[0] if k == 1 else jnp.concatenate(outs, axis=1)

    rng = np.random.default_rng(0)
    args = ([rng.standard_normal((1000, 16), dtype=np.float32) for _ in range(k)]
            + [rng.integers(0, 1000, 2, dtype=np.int32) for _ in range(k)]
            + [np.zeros(2, np.int32) for _ in range(k)])
    module = from_jax(f, *args).module
    ember = rewrite_module(module, cost_model=False).module
    empty = rewrite_module(module, cost_model=False).module
    for op in empty.walk():
        if op.opcode == "custom-call":
            op.attributes["custom_call_target"] = EMPTY
    return {"xla": module, "empty": empty, "ember": ember}, args


def _register_empty() -> None:
    import jax

    from ember_xla.native import load_library

    jax.ffi.register_ffi_target(EMPTY, jax.ffi.pycapsule(load_library().EmberEmptyHandler),
                                platform="cpu")


def run(k: int, reps: int) -> dict[str, dict[str, float]]:
    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.runtime.execute import compile_module

    modules, args = _modules(k)
    one = np.zeros((1,), np.int32)
    exes = {n: (compile_module(m)._loaded, [jax.device_put(a) for a in args])
            for n, m in modules.items()}
    exes["module"] = (compile_module(from_jax(lambda v: v + 1, one).module)._loaded,
                      [jax.device_put(one)])
    want = np.asarray(exes["xla"][0].execute(exes["xla"][1])[0])
    got = np.asarray(exes["ember"][0].execute(exes["ember"][1])[0])
    if not np.array_equal(want, got):
        raise SystemExit(f"k={k}: ember != XLA")
    inner = 20
    times: dict[str, list[float]] = {n: [] for n in exes}
    for _ in range(reps):
        for n, (ex, dev) in exes.items():
            t = time.perf_counter()
            for _ in range(inner):
                outs = ex.execute(dev)
            jax.block_until_ready(outs)
            times[n].append((time.perf_counter() - t) / inner)
    return {n: {"median_us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6}
            for n, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _register_empty()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.reps} alternating samples of 20 runs")
    for k in (1, 8):
        r = run(k, args.reps)
        what = "two lookups, B=1 D=16" if k == 1 else "8 tables of two lookups, grouped + concat"
        print(f"\n{what}")
        print("| variant | median us | min us |")
        print("|---|---:|---:|")
        for n, v in r.items():
            print(f"| {n} | {v['median_us']:.2f} | {v['min_us']:.2f} |")
        for stat in ("median_us", "min_us"):
            print(f"ember - empty ({stat[:-3]}): {r['ember'][stat] - r['empty'][stat]:+.2f} us; "
                  f"empty - xla: {r['empty'][stat] - r['xla'][stat]:+.2f} us")
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
