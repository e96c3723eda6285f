"""Speed of the DAE timing model: the Python reference (``emulator/timing.py``) vs the C++ core
(``emulator/timing_cc.py``), in queue tokens per second (data-queue entries + control tokens
replayed) and trace events per second, on synthetic embedding-bag traces (DLRM-style bags,
one data-queue entry per element / vector chunk / row, as O0 / O1 / O2+ push them).

The C++ core is timed on the whole trace, given as numpy arrays (``TraceArrays``: what the
program executor hands it) and as a ``Trace`` of Python lists (conversion included); the
Python reference on the first ``python_batch`` bags (it is ~100x slower). Variants alternate
in one process; medians of ``repeats`` runs.

    PYTHONPATH=. python benchmarks/bench_emulator.py [--batch 2048] [--pooling 20] [--repeats 3]

With ``--program`` the whole emulate path of a bag program is timed two ways: the full
engine (``executor_cc.emulate_program``: every value executed, trace, timing; ``ember-xla
emulate --engine=xla``) and the fast engine, ``ember-xla emulate``'s default (outputs from the
bit-exact native kernel ``ember.offsets_bag``, timing from the executor's addresses mode,
``fast_engine.time_cluster``; the table is put on the device once, as a model's table would
be); both must give the same cycles and outputs. CPU seconds
(``time.process_time``) are printed beside wall seconds: the machine is shared.

``measure_speed(...)`` returns the numbers as a dict (bench_ladder imports it)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import TraceArrays, simulate_fast
from ember_xla.machines.config import Target, load_target


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def measure_speed(
    target: str | Target = "tmu",
    batch: int = 2048,
    pooling: int = 20,
    rows: int = 1_000_000,
    dim: int = 64,
    granularity: str = "row",
    python_batch: int | None = None,
    repeats: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Tokens/s and events/s of the Python reference and the C++ core on a bag trace of
    ``batch`` bags x ``pooling`` lookups into a ``rows`` x ``dim`` f32 table."""
    tgt = load_target(target) if isinstance(target, str) else target
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, rows, batch * pooling)
    offsets = np.arange(0, batch * pooling + 1, pooling)
    trace = embedding_bag_trace(rows, dim, ids, offsets, granularity, vl=tgt.vector_lanes_f32)
    arrays = TraceArrays.from_trace(trace)
    pb = python_batch or max(1, batch // 16)
    small = embedding_bag_trace(
        rows, dim, ids[: pb * pooling], offsets[: pb + 1], granularity, vl=tgt.vector_lanes_f32
    )
    times: dict[str, list[float]] = {"cpp_arrays": [], "cpp_trace": [], "python": []}
    cpu: list[float] = []
    reports: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in (
            ("cpp_arrays", lambda: simulate_fast(tgt, arrays)),
            ("cpp_trace", lambda: simulate_fast(tgt, trace)),
            ("python", lambda: simulate(tgt, small)),
        ):
            c0 = time.process_time()
            dt, reports[name] = _timed(fn)
            times[name].append(dt)
            if name == "cpp_arrays":
                cpu.append(time.process_time() - c0)
    if simulate(tgt, small) != simulate_fast(tgt, small):
        raise AssertionError("C++ core and Python reference disagree")
    full, part = reports["cpp_arrays"], reports["python"]
    tok_full = full.tokens + full.entries
    tok_part = part.tokens + part.entries
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "target": tgt.name,
        "granularity": granularity,
        "batch": batch,
        "pooling": pooling,
        "lookups": batch * pooling,
        "events": len(trace),
        "tokens": tok_full,
        "cycles": full.cycles,
        "python_batch": pb,
        "cpp_seconds": med["cpp_arrays"],
        "cpp_trace_seconds": med["cpp_trace"],
        "python_seconds": med["python"],
        "cpp_tokens_per_s": tok_full / med["cpp_arrays"],
        "cpp_cpu_tokens_per_s": tok_full / statistics.median(cpu),
        "cpp_events_per_s": len(trace) / med["cpp_arrays"],
        "cpp_trace_tokens_per_s": tok_full / med["cpp_trace"],
        "python_tokens_per_s": tok_part / med["python"],
        "python_events_per_s": len(small) / med["python"],
    }


def bag_program(level: int | str, dim: int) -> Any:
    """The DAE program of the f32 sum embedding bag: compiled at ``-O<level>`` from
    tests/dae_target/slc_examples.py, or the hand-written one (``level="hand"``)."""
    from ember_xla.dae_target.handwritten import sum_bag_dlc
    from ember_xla.dae_target.program import emit_program

    if level == "hand":
        return emit_program(sum_bag_dlc(vl=16))
    import ember_xla.dae_target.passes  # noqa: F401
    from ember_xla.dae_target.passes.levels import run_stages

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "dae_target"))
    import slc_examples

    return emit_program(run_stages(slc_examples.embedding_bag(), int(level))[-1][1])


def native_bag(batch: int, dim: int) -> Any:
    """The native kernel of the f32 sum bag (``ember.offsets_bag``, jitted): (table, ids,
    offsets) -> out; ids are in range, so its clip mode is the program's plain gather."""
    import jax

    from ember_xla.custom_calls import target_of_kind
    from ember_xla.native import register_targets

    register_targets()
    call = jax.ffi.ffi_call(
        target_of_kind("offsets_bag").name, jax.ShapeDtypeStruct((batch, dim), np.float32)
    )
    fn = jax.jit(
        lambda t, i, o: call(
            t,
            i,
            o,
            combiner="sum",
            index_mode="clip",
            wrap_negative=False,
            weighted=False,
            init=0.0,
            index_bits=32,
        )
    )
    return lambda table, ids, off: np.asarray(fn(table, ids, off.astype(np.int32)))


def measure_program_speed(
    level: int | str = 3,
    target: str | Target = "tmu",
    batch: int = 4096,
    pooling: int = 73,
    rows: int = 1_000_000,
    dim: int = 64,
    python_batch: int | None = None,
    repeats: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """The whole emulate path on a DLRM-sized bag (one table, ``batch`` x ``pooling``
    lookups): C++ (``executor_cc.emulate_program``: execution + trace + timing, no Python in
    the loop) vs the Python reference (``reference.emulate``) on the first ``python_batch`` bags."""
    from ember_xla.emulator.executor_cc import emulate_program
    from ember_xla.emulator.fast_engine import ADDRESSES, time_cluster
    from ember_xla.emulator.reference import emulate

    tgt = load_target(target) if isinstance(target, str) else target
    program = bag_program(level, dim)
    rng = np.random.default_rng(seed)
    off = np.arange(0, batch * pooling + 1, pooling, dtype=np.int64)
    ids = rng.integers(0, rows, batch * pooling).astype(np.int32)
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    pb = python_batch or max(1, batch // 64)
    small = [off[: pb + 1], ids[: pb * pooling], table]
    shape, small_shape = [(batch, dim)], [(pb, dim)]
    native = native_bag(batch, dim)
    import jax

    table_dev = jax.device_put(table)  # once: the model's table lives on the device
    native(table_dev, ids, off)  # compile once

    def fast() -> tuple[np.ndarray, Any]:
        out = native(table_dev, ids, off)
        ft = time_cluster(program, [off, ids, table], [out], tgt)
        if ft.mode != ADDRESSES:
            raise AssertionError(f"the bag program needs the full mode: {ft.why_full}")
        return out, ft.timing

    times: dict[str, list[float]] = {"cpp": [], "python": [], "fast": []}
    cpu: list[float] = []
    cpu_fast: list[float] = []
    for _ in range(repeats):
        c0 = time.process_time()
        dt, (out, rep) = _timed(lambda: emulate_program(program, [off, ids, table], tgt, shape))
        cpu.append(time.process_time() - c0)
        times["cpp"].append(dt)
        c0 = time.process_time()
        dt, (out_f, rep_f) = _timed(fast)
        cpu_fast.append(time.process_time() - c0)
        times["fast"].append(dt)
        dt, (out_s, rep_s) = _timed(lambda: emulate(program, small, tgt, small_shape))
        times["python"].append(dt)
    _, rep_c = emulate_program(program, small, tgt, small_shape)
    if rep_c != rep_s or not np.array_equal(out[0][:pb], out_s[0]):
        raise AssertionError("C++ and Python emulators disagree")
    if rep_f != rep or out_f.tobytes() != out[0].tobytes():
        raise AssertionError(
            "the fast engine (native kernel + addresses mode) and the full engine disagree"
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    tok, tok_s = rep.tokens + rep.entries, rep_s.tokens + rep_s.entries
    return {
        "level": level,
        "lookups": batch * pooling,
        "tokens": tok,
        "cycles": rep.cycles,
        "cpp_seconds": med["cpp"],
        "python_seconds": med["python"],
        "python_batch": pb,
        "cpp_tokens_per_s": tok / med["cpp"],
        "python_tokens_per_s": tok_s / med["python"],
        "cpp_lookups_per_s": batch * pooling / med["cpp"],
        "cpp_cpu_lookups_per_s": batch * pooling / statistics.median(cpu),
        "fast_seconds": med["fast"],
        "fast_lookups_per_s": batch * pooling / med["fast"],
        "fast_cpu_lookups_per_s": batch * pooling / statistics.median(cpu_fast),
    }


#: The speed goals: a whole-model emulation at -O3 and the timing core on row tokens.
GOAL_LOOKUPS = 2e6
GOAL_ROW_TOKENS = 20e6


def _goal(what: str, wall: float, cpu: float, goal: float, unit: str) -> str:
    met = "met" if wall >= goal else ("met in CPU time only" if cpu >= goal else "NOT met")
    return (
        f"  {what}: {wall / 1e6:.2f} / {cpu / 1e6:.2f} M {unit}/s, goal >= "
        f"{goal / 1e6:.0f} M: {met}"
    )


def format_row(m: dict[str, Any]) -> str:
    return (
        f"{m['granularity']:8s} {m['lookups']:8d} {m['events']:9d} {m['tokens']:9d} "
        f"{m['python_tokens_per_s'] / 1e6:10.3f} {m['cpp_tokens_per_s'] / 1e6:10.2f} "
        f"{m['cpp_trace_tokens_per_s'] / 1e6:12.2f} "
        f"{m['cpp_tokens_per_s'] / m['python_tokens_per_s']:8.0f}x   "
        f"{m['python_events_per_s'] / 1e6:8.3f} {m['cpp_events_per_s'] / 1e6:9.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="tmu")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--pooling", type=int, default=20)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--granularity", default="row,chunk,element")
    ap.add_argument(
        "--program",
        default="",
        help="also time the whole emulate path of the bag program at these levels "
        "(e.g. 0,3,hand), one table, --batch x --pooling lookups",
    )
    a = ap.parse_args()
    goals: list[str] = []
    print(
        f"target {a.target}: {a.batch} bags x {a.pooling} lookups, table {a.rows} x {a.dim} "
        "f32; tokens = data-queue entries + control tokens; M = million per second"
    )
    print(
        "granular  lookups    events    tokens  py Mtok/s C++ Mtok/s C++(lists) Mtok/s"
        "  C++/py   py Mev/s C++ Mev/s"
    )
    for g in a.granularity.split(","):
        m = measure_speed(a.target, a.batch, a.pooling, a.rows, a.dim, g, repeats=a.repeats)
        print(format_row(m))
        if g == "row":
            goals.append(
                _goal(
                    "timing core on row tokens",
                    m["cpp_tokens_per_s"],
                    m["cpp_cpu_tokens_per_s"],
                    GOAL_ROW_TOKENS,
                    "tokens",
                )
            )
    if a.program:
        print(
            f"\nwhole emulate path (program execution + trace + timing), {a.batch} bags x "
            f"{a.pooling} lookups into {a.rows} x {a.dim} f32"
        )
        print(
            "level  lookups    tokens   C++ s  C++ Mtok/s  C++ Mlookups/s  py Mtok/s  C++/py"
            "   fast s  fast Mlookups/s (CPU)  fast/C++"
        )
        for lv in a.program.split(","):
            m = measure_program_speed(
                lv, a.target, a.batch, a.pooling, a.rows, a.dim, repeats=a.repeats
            )
            print(
                f"{lv:>5} {m['lookups']:8d} {m['tokens']:9d} {m['cpp_seconds']:7.3f} "
                f"{m['cpp_tokens_per_s'] / 1e6:11.2f} {m['cpp_lookups_per_s'] / 1e6:15.2f} "
                f"{m['python_tokens_per_s'] / 1e6:10.4f} "
                f"{m['cpp_tokens_per_s'] / m['python_tokens_per_s']:7.0f}x "
                f"{m['fast_seconds']:8.3f} {m['fast_lookups_per_s'] / 1e6:8.2f} "
                f"({m['fast_cpu_lookups_per_s'] / 1e6:.2f}) "
                f"{m['cpp_seconds'] / m['fast_seconds']:12.1f}x"
            )
            if str(lv) == "3":
                goals.append(
                    _goal(
                        "whole emulate path at -O3, full engine",
                        m["cpp_lookups_per_s"],
                        m["cpp_cpu_lookups_per_s"],
                        GOAL_LOOKUPS,
                        "lookups",
                    )
                )
                goals.append(
                    _goal(
                        "whole emulate path at -O3, fast engine (native outputs + addresses mode)",
                        m["fast_lookups_per_s"],
                        m["fast_cpu_lookups_per_s"],
                        GOAL_LOOKUPS,
                        "lookups",
                    )
                )
    if goals:
        print(
            "\nspeed goals (M per second of wall clock / of this process's CPU time; the "
            "machine is shared, so the CPU rate is what one core gives):"
        )
        for line in goals:
            print(line)


if __name__ == "__main__":
    main()
