"""How fast the reference interpreters of the Ember levels run: table elements looked up per
second of interpreter CPU time, per level (SLC, SLCV, DLC) and -O level, on a DLRM-like bag.

A benchmark, not a test. The bag is one ``ember.offsets_bag`` custom-call (sum, clip, f32
table of ``--rows`` x ``--dim``, s32 ids, ``--bags`` bags of exactly ``--pooling`` uniform
random lookups, as DLRM's multi-hot features), written as HLO text and taken through the real
path: ``lower/to_slc.py`` then ``passes/levels.py``'s -O0..-O4 pipelines (``ember-xla lower``
does the same). Measured programs: the SLC function right after lowering, the SLCV function
before ``decouple`` at -O1..-O4, and the DLC function of every level. Every program's outputs
are first checked bit-exact against the call itself run on XLA:CPU (the native kernel).

"elements" = bags x pooling x dim (the table elements the bag reads; the same work unit for
every level). Times are process CPU time (``time.process_time``; the interpreters are
single-threaded numpy/Python, so CPU time is what a less loaded machine would see as wall
time), medians of ``--reps`` runs, the programs interleaved within each repetition.

    python benchmarks/bench_interp.py                      # 16 bags x 16 lookups, D=64
    python benchmarks/bench_interp.py --bags 4 --reps 1    # smoke run
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def bag_module_text(rows: int, dim: int, lookups: int, bags: int) -> str:
    cfg = ('combiner = "sum", index_bits = 64 : i64, index_mode = "clip", init = 0.0 : f64, '
           "weighted = false, wrap_negative = false")
    return (f"HloModule bench_bag\n\nENTRY main {{\n"
            f"  table = f32[{rows},{dim}]{{1,0}} parameter(0)\n"
            f"  indices = s32[{lookups}]{{0}} parameter(1)\n"
            f"  offsets = s32[{bags + 1}]{{0}} parameter(2)\n"
            f"  ROOT bag = f32[{bags},{dim}]{{1,0}} custom-call(table, indices, offsets), "
            f'custom_call_target="ember.offsets_bag", api_version=API_VERSION_TYPED_FFI, '
            f"backend_config={{{cfg}}}\n}}\n")


def level_of(module) -> str:
    prefixes = {op.opcode.partition(".")[0] for op in module.walk()}
    return "DLC" if "dlc" in prefixes else "SLCV" if "slcv" in prefixes else "SLC"


def programs(call) -> list[tuple[str, object]]:
    """(label, module): SLC after lowering, SLCV before decouple at -O1..-O4, DLC at -O0..-O4."""
    import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)
    from ember_xla.dae_target.lower.to_slc import lower_call
    from ember_xla.dae_target.passes.levels import LEVELS
    from ember_xla.ir.passes import parse_pipeline

    out = [("SLC    (lowered)", lower_call(call))]
    for level, pipeline in LEVELS.items():
        m = lower_call(call)
        slcv = None
        for p in parse_pipeline(pipeline):
            if p.name == "decouple" and level_of(m) == "SLCV":
                slcv = m.clone()
            p.apply(m)
        if slcv is not None:
            out.append((f"SLCV   -O{level}", slcv))
        out.append((f"DLC    -O{level}", m))
    return out


def main() -> None:
    from ember_xla.dae_target.interp.run import run_counted
    from ember_xla.dae_target.lower.cluster import ember_calls
    from ember_xla.hlo.parser import parse_module
    from ember_xla.runtime.execute import run_module

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bags", type=int, default=16)
    ap.add_argument("--pooling", type=int, default=16)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    lookups = args.bags * args.pooling
    hlo = parse_module(bag_module_text(args.rows, args.dim, lookups, args.bags), "<bench>")
    call = ember_calls(hlo)[0]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((args.rows, args.dim)).astype(np.float32),
              rng.integers(0, args.rows, lookups).astype(np.int32),
              (np.arange(args.bags + 1) * args.pooling).astype(np.int32)]
    want = run_module(hlo, inputs)[0]
    progs = programs(call)
    counters = {}
    for label, m in progs:  # correctness first (and a warm-up run)
        outs, counters[label] = run_counted(m, inputs)
        if not np.array_equal(outs[0], want):
            raise SystemExit(f"{label}: output differs from the kernel on XLA:CPU")
    times: dict[str, list[float]] = {label: [] for label, _ in progs}
    walls: dict[str, list[float]] = {label: [] for label, _ in progs}
    for _ in range(args.reps):
        for label, m in progs:
            t0, w0 = time.process_time(), time.perf_counter()
            run_counted(m, inputs)
            times[label].append(time.process_time() - t0)
            walls[label].append(time.perf_counter() - w0)
    elements = lookups * args.dim
    print(f"DLRM-like sum bag: {args.bags} bags x {args.pooling} lookups, D={args.dim}, "
          f"{args.rows} rows, f32; {elements} elements; all outputs bit-exact vs XLA:CPU")
    print(f"{'program':18s}{'CPU s':>9s}{'wall s':>9s}{'elem/s (CPU)':>14s}"
          f"{'vs SLC':>8s}{'callbacks/tokens':>18s}")
    base = statistics.median(times[progs[0][0]])
    for label, _ in progs:
        cpu, wall = statistics.median(times[label]), statistics.median(walls[label])
        c = counters[label]
        events = c.get("dlc.tokens", c.get("slc.callbacks", 0))
        print(f"{label:18s}{cpu:9.3f}{wall:9.3f}{elements / cpu:14.0f}{base / cpu:7.1f}x"
              f"{events:18d}")


if __name__ == "__main__":
    main()
