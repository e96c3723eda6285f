"""The cost model's decision on padded bags (``t[ids].sum(1)``, how Keras and flax write a
bag; ``--combiner max``: ``jnp.take(t, ids, mode="clip").max(1)``), checked against
measurement: per shape, ``ember_xla.jit`` with no flags and with every cluster rewritten
(``EMBER_XLA_COST_MODEL=off``) against ``jax.jit``, alternating in one process
(bench_jit.rounds), with the decision and its predicted times. Shapes off the calibration grid
(B, P, D between its values) are included, and a four-table stage of one batch concatenated
(a keras-rs / DLRM-style embedding stage).

A row is a loss when the default is rewritten but measured slower than jax.jit (by the 95%
interval), or kept in XLA while the forced rewrite measured 1.33x faster or more (the margin
the model asks for).

    python benchmarks/bench_padded_decision.py            # every shape, 21 rounds
    python benchmarks/bench_padded_decision.py --rounds 11 --shapes 256x5x16,1x20x64
    python benchmarks/bench_padded_decision.py --combiner max
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_jit  # noqa: E402

ROWS = 20_000
SHAPES = ("1x5x256", "1x20x64", "1x50x32", "8x3x16", "16x5x64", "16x20x16", "32x7x48",
          "100x30x128", "256x5x16", "512x3x16", "4096x10x64")
STAGE_ROWS = (1000, 50_000, 200_000, 10)  # the four tables of the stage rows
MARGIN_SPEEDUP = 1.33


def _functions(tables: int, combiner: str):
    import jax
    import jax.numpy as jnp

    def bag(t, i):
        if combiner == "max":  # clip mode, as the calibration's max bags
            return jnp.take(t, i, axis=0, mode="clip").max(1)
        if combiner == "segment_sum":  # the same bags as a segment sum (not a padded bag)
            b, p = i.shape
            seg = jnp.repeat(jnp.arange(b), p)
            return jax.ops.segment_sum(jnp.take(t, i.reshape(-1), axis=0), seg, b)
        return t[i].sum(1)

    def bags(*args):
        ts, ids = args[:tables], args[tables:]
        out = [bag(t, i) for t, i in zip(ts, ids, strict=True)]
        return out[0] if tables == 1 else jnp.concatenate(out, 1)

    return bags


def _case(name: str, rows: tuple[int, ...], b: int, p: int, d: int, n: int,
          rng: np.random.Generator, combiner: str) -> bool:
    import jax

    import ember_xla

    args = [rng.standard_normal((r, d), dtype=np.float32) for r in rows] + \
        [rng.integers(0, r, (b, p)).astype(np.int32) for r in rows]
    args = [jax.device_put(a) for a in args]
    f = _functions(len(rows), combiner)
    fns = {"jax.jit": jax.jit(f), "default": ember_xla.jit(f)}
    before = os.environ.get("EMBER_XLA_COST_MODEL")
    os.environ["EMBER_XLA_COST_MODEL"] = "off"
    try:
        fns["forced"] = ember_xla.jit(f)
        fns["forced"](*args)  # traced and rewritten with the model off
    finally:
        if before is None:
            os.environ.pop("EMBER_XLA_COST_MODEL")
        else:
            os.environ["EMBER_XLA_COST_MODEL"] = before
    want = np.asarray(fns["jax.jit"](*args))
    same = all(np.asarray(g(*args)).tobytes() == want.tobytes() for g in fns.values())
    report = [r for r in fns["default"].reports.values()]
    rewritten = [c for r in report for c in r["clusters"]]
    kept = [m for r in report for m in r["near_misses"] if m.get("kept_in_xla")]
    pred = (rewritten or kept)[0]["predicted_us"] if rewritten or kept else {}
    runs = bench_jit.rounds(fns, args, n, 5)
    default = bench_jit.paired(runs, "jax.jit", "default")
    forced = bench_jit.paired(runs, "jax.jit", "forced")
    decision = f"{len(rewritten)} rewritten" if rewritten else f"{len(kept)} kept in XLA"
    loss = (rewritten and default[2] < 1.0) or (kept and forced[1] >= MARGIN_SPEEDUP)
    print(f"| {name} | {decision} | {pred.get('ember', 0):.1f} / {pred.get('xla', 0):.1f} | "
          f"{bench_jit.ratio_text(default)} | {bench_jit.ratio_text(forced)} | "
          f"{'yes' if same else 'NO'} | {'LOSS' if loss else 'ok'} |", flush=True)
    return same and not loss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--shapes", default=",".join(SHAPES), help="BxPxD,... (one table each)")
    p.add_argument("--combiner", choices=("sum", "max", "segment_sum"), default="sum")
    p.add_argument("--stage", default="256x5x16",
                   help="BxPxD of the four-table stage ('' to skip)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.rounds} rounds, medians of per-round ratios (95% CI); load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| bag | default decision | predicted ember / XLA us | default vs jax.jit | "
          "forced rewrite vs jax.jit | bit-equal | |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for shape in filter(None, args.shapes.split(",")):
        b, pool, d = (int(x) for x in shape.split("x"))
        ok &= _case(f"B={b} P={pool} D={d}", (ROWS,), b, pool, d, args.rounds, rng,
                    args.combiner)
    if args.stage:
        b, pool, d = (int(x) for x in args.stage.split("x"))
        ok &= _case(f"4 tables B={b} P={pool} D={d}", STAGE_ROWS, b, pool, d, args.rounds, rng,
                    args.combiner)
    print(f"{'no losses' if ok else 'LOSSES or mismatches above'}; load average "
          f"{os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
