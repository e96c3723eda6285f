"""The batch-size sweep of ``bench_embedding.py --sweep``: every model at batch 1, 16, 256 and
2048, XLA:CPU against the module ``rewrite_module`` produces with its defaults (cost model
on, table batching on), alternating in one process, medians.

Models: single tables (segment_sum / segment_max bags and jnp.sum padded bags, pooling 1-100,
D 16-256, 20k-row tables), two 8-table DLRM-style stages (segment sums, concatenated; D=64
with 100..100k rows, D=16 with 10..50k rows) and the 26-table MLPerf stage (D=128, rows
capped). Every row prints the speed-up and how many
clusters stayed in XLA; a module whose clusters all stayed in XLA is the original module, so
its row counts as 1.0x (the measured ratio of two identical modules is printed beside it).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
from stage_model import MLPERF_ROWS, POOLING, stage_fn

BATCHES = (1, 16, 256, 2048)
SINGLE = [  # (op, pooling, D)
    ("segment_sum", 1, 16), ("segment_sum", 10, 64), ("segment_sum", 100, 256),
    ("segment_max", 1, 16), ("segment_max", 10, 64), ("segment_max", 100, 256),
    ("sum", 1, 16), ("sum", 10, 64), ("sum", 100, 256),
]  # fmt: skip
EIGHT_ROWS = (100_000, 50_000, 20_000, 10_000, 5_000, 1_000, 500, 100)
EIGHT_POOLING = (20, 10, 5, 3, 2, 1, 1, 1)
# The issue-reports' 8-table model: D=16, tables of 10..50,000 rows (same pooling).
SMALL_EIGHT_ROWS = (50_000, 20_000, 10_000, 5_000, 1_000, 500, 100, 10)


def single_fn(op: str, batch: int):
    import jax
    import jax.numpy as jnp

    if op.startswith("segment"):
        red = getattr(jax.ops, op)
        return lambda t, i, s: red(jnp.take(t, i, axis=0), s, num_segments=batch)
    return lambda t, i: jnp.sum(jnp.take(t, i, axis=0), axis=1)


def single_inputs(op, batch, pooling, dim, rng, rows=20_000):
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    ids = rng.integers(0, rows, batch * pooling, dtype=np.int32)
    if op.startswith("segment"):
        return [table, ids, np.repeat(np.arange(batch, dtype=np.int32), pooling)]
    return [table, ids.reshape(batch, pooling)]


def stage_inputs(tables, pooling, batch, rng):
    idx = [rng.integers(0, t.shape[0], batch * p, dtype=np.int32)
           for t, p in zip(tables, pooling, strict=True)]
    seg = [np.repeat(np.arange(batch, dtype=np.int32), p) for p in pooling]
    return list(tables) + idx + seg


def compare(fn, inputs, reps: int, cost_model: bool = True) -> dict:
    """Rewrite ``fn`` (cost model on unless told), check the outputs, time both alternately."""
    from ember_xla.hlo_import.jax_source import from_jax

    return compare_module(from_jax(fn, *inputs).module, inputs, reps, cost_model)


def compare_module(module, inputs, reps: int, cost_model: bool = True) -> dict:
    """Rewrite ``module`` with ``rewrite_module``'s defaults (cost model on unless told,
    grouping on), check the outputs bit for bit, time both alternately in this process;
    medians."""
    import jax

    from ember_xla.native import table_pages
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    result = rewrite_module(module, cost_model=cost_model)
    kept = [n for n in result.near_misses if n.get("kept_in_xla")]
    on_device = [x if isinstance(x, jax.Array) else jax.device_put(x) for x in inputs]
    ex = {"xla": compile_module(module)._loaded, "ember": compile_module(result.module)._loaded}
    want = [np.asarray(x) for x in ex["xla"].execute(on_device)]
    got = [np.asarray(x) for x in ex["ember"].execute(on_device)]
    same = len(want) == len(got) and all(
        w.shape == g.shape and w.dtype == g.dtype and w.tobytes() == g.tobytes()
        for w, g in zip(want, got, strict=True))
    # A second call queues the large tables' move onto huge pages (native table_pages); time the
    # steady state after it, as bench_embedding does.
    jax.block_until_ready(ex["ember"].execute(on_device))
    table_pages.wait(900)
    t0 = time.perf_counter()
    jax.block_until_ready(ex["xla"].execute(on_device))
    inner = max(1, min(100, int(3e-3 / max(time.perf_counter() - t0, 1e-6))))
    times: dict[str, list[float]] = {"xla": [], "ember": []}
    for _ in range(reps):
        for k, e in ex.items():
            t = time.perf_counter()
            for _ in range(inner):
                outs = e.execute(on_device)
            jax.block_until_ready(outs)
            times[k].append((time.perf_counter() - t) / inner)
    med = {k: statistics.median(v) for k, v in times.items()}
    measured = med["xla"] / med["ember"]
    all_kept = not result.clusters
    return {"xla_ms": med["xla"] * 1e3, "ember_ms": med["ember"] * 1e3, "measured": measured,
            "ratio": 1.0 if all_kept else measured, "rewritten": len(result.clusters),
            "kept": len(kept), "same": same,
            "kept_reasons": [n["reason"] for n in kept]}


def jax_row(name: str, fn, inputs, reps: int, cost_model: bool = True) -> bool:
    """Export ``fn`` on ``inputs`` as jax.jit lowers it, ``compare_module`` it, print its
    ``row``; True when the row is slower than XLA:CPU or not bit-equal."""
    from ember_xla.hlo_import.jax_source import from_jax

    r = compare_module(from_jax(fn, *inputs).module, list(inputs), reps, cost_model)
    print(row(name, r), flush=True)
    return r["ratio"] < 1.0 or not r["same"]


def row(name: str, r: dict) -> str:
    ok = "ok" if r["ratio"] >= 1.0 else "SLOWER"
    note = " (all kept in XLA: counts as 1.0x)" if r["rewritten"] == 0 else ""
    return (f"| {name} | {r['xla_ms']:.3f} | {r['ember_ms']:.3f} | {r['measured']:.2f}x | "
            f"{r['ratio']:.2f}x {ok}{note} | {r['rewritten']} | {r['kept']} | "
            f"{'yes' if r['same'] else 'NO'} |")


def run_sweep(reps: int, max_rows: int, stage_tables=None, batches=BATCHES, log=print) -> int:
    """Prints the markdown table; returns the number of rows below 1.0x (or not bit-equal)."""
    import jax

    rng = np.random.default_rng(0)
    log(f"sweep: {reps} alternating reps per row, medians; load average "
        f"{os.getloadavg()[0]:.2f}")
    log("| model | XLA ms | rewritten ms | measured | counted | clusters rewritten | "
        "kept in XLA | == XLA |")
    log("|---|---:|---:|---:|---|---:|---:|---|")
    bad = 0
    eight = [jax.device_put(rng.standard_normal((n, 64), dtype=np.float32)) for n in EIGHT_ROWS]
    small_eight = [jax.device_put(rng.standard_normal((n, 16), dtype=np.float32))
                   for n in SMALL_EIGHT_ROWS]
    if stage_tables is None:
        stage_tables = [jax.device_put(rng.standard_normal((min(n, max_rows), 128),
                                                           dtype=np.float32))
                        for n in MLPERF_ROWS]
    for b in batches:
        jobs = [(f"B={b} {'padded jnp.sum' if op == 'sum' else op} P={p} D={d}",
                 single_fn(op, b), single_inputs(op, b, p, d, rng), reps)
                for op, p, d in SINGLE]
        jobs.append((f"B={b} 8-table DLRM-style (D=64)", stage_fn(b),
                     stage_inputs(eight, EIGHT_POOLING, b, rng), reps))
        jobs.append((f"B={b} 8-table DLRM-style (D=16, rows 10..50,000)", stage_fn(b),
                     stage_inputs(small_eight, EIGHT_POOLING, b, rng), reps))
        jobs.append((f"B={b} 26-table MLPerf stage (D=128, rows <= {max_rows:,})", stage_fn(b),
                     stage_inputs(stage_tables, POOLING, b, rng), reps))
        for name, fn, inputs, n in jobs:
            r = compare(fn, inputs, n)
            bad += r["ratio"] < 1.0 or not r["same"]
            log(row(name, r))
            for reason in r["kept_reasons"][:2]:
                log(f"|   kept: {reason} |||||||")
    log(f"rows below 1.0x or not bit-equal: {bad}; load average {os.getloadavg()[0]:.2f}")
    return bad
