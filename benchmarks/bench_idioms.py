"""The idiom corpus timed: every model of ``tests/rewrites/idiom_models.py`` (JAX and TF
embedding idioms as unmodified code exports them) rewritten with ``rewrite_module``'s defaults
(cost model on, grouping on) and run against its original module on XLA:CPU, alternating in
one process (``sweep.compare_module``), medians. A model whose clusters all stayed in XLA runs
the original module: its row counts as 1.0x (the measured ratio of the two identical modules is
printed beside it, as the sweep does). A benchmark, not a test.

    python benchmarks/bench_idioms.py --reps 15
    python benchmarks/bench_idioms.py --only jax_take_fill_segment_sum keras_embedding_sum
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
from sweep import compare_module, row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "rewrites"))


def time_idiom(name: str, reps: int) -> dict:
    import idiom_models
    import jax

    from ember_xla.hlo_import.proto import module_from_proto

    proto, _ = idiom_models.hlo(name)
    args = idiom_models.inputs(name, "random")
    wide = any(np.asarray(a).dtype.itemsize == 8 for a in args)
    module = module_from_proto(proto, name)
    if wide:  # s64 / f64 inputs stay 64-bit on the device
        with jax.enable_x64(True):
            return compare_module(module, args, reps)
    return compare_module(module, args, reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", nargs="*", default=None, help="idiom names (default: all)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import jax

    jax.config.update("jax_platforms", "cpu")
    import idiom_models

    names = args.only or [i.name for i in idiom_models.IDIOMS]
    print(f"idiom corpus: {len(names)} models, {args.reps} alternating reps, medians; load "
          f"average {os.getloadavg()[0]:.2f}")
    print("| model | XLA ms | rewritten ms | measured | counted | clusters rewritten | "
          "kept in XLA | == XLA |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    slower, unequal = 0, []
    for name in names:
        r = time_idiom(name, args.reps)
        slower += r["ratio"] < 1.0
        if not r["same"]:
            unequal.append(f"{name} (corpus tolerance {idiom_models.idiom(name).tolerance:g})")
        print(row(name, r), flush=True)
        for reason in r["kept_reasons"][:1]:
            print(f"|   kept: {reason} |||||||")
    print(f"rows below 1.0x: {slower}; not bit-equal: {len(unequal)}"
          + (f" ({', '.join(unequal)})" if unequal else "")
          + f"; load average {os.getloadavg()[0]:.2f}")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
