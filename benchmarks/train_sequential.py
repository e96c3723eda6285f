"""benchmarks/bench_train.py one variant at a time, for sizes where every variant's copy of the
tables does not fit in memory at once (1M rows: 3.4 GiB of tables, about 16 copies when all
variants are alive). Each variant is built, checked (the rewritten steps against XLA's one-step
outputs, kept only as digests), timed in BLOCK runs per repetition and profiled, with its peak
resident set sampled while it runs (over the resident set before it was built: its tables,
state and step buffers, not the transients of building it), then freed before the next. The
variants no longer share their load conditions block by block: the load average is printed
per variant."""

from __future__ import annotations

import gc
import hashlib
import os
import statistics
import time

import numpy as np
from bench_embedding import BLOCK
from train_memory import PeakRss, copy_floor, faults, rss, xla_new_tables
from train_profile import profile
from train_variants import make_variant

from ember_xla.native import buffer_cache


def digest(outs: list[np.ndarray]) -> list[str]:
    return [hashlib.blake2b(memoryview(np.ascontiguousarray(o)).cast("B")).hexdigest()
            for o in outs]


def timed(run, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        run()
        for _ in range(BLOCK - 1):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    return times


def estimate_bytes(data, optimizer: str) -> int:
    """About what all variants hold at once when interleaved: some 17 copies of the tables
    (and slots): each JAX variant's inputs, outputs and check outputs, TBE's and torch's own
    tables, the copy floors' destinations, the shared data."""
    rows, tables = data[0], data[1]
    state = sum(t.nbytes for t in tables) + (0 if optimizer == "sgd" else sum(rows) * 4)
    return 17 * state


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def settle() -> None:
    """Let the previous variant's memory go back to the system before the next base reading:
    collect, give XLA's runtime a moment to release donated and dropped buffers, unmap the
    result-buffer cache's idle blocks, trim the heap."""
    import ctypes

    gc.collect()
    time.sleep(0.5)
    buffer_cache.release_idle()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def run_sequential(args, data, optimizer: str):
    """(medians, minimums, labels, peak RSS GiB, profiles, check lines, load per variant,
    (page faults, system CPU ms) per step of each variant)."""
    med, mins, names, peaks, prof, load, flt = {}, {}, {}, {}, {}, {}, {}
    checks, ref = [], None
    for name in [*args.variants, "copy", "copy_mt", "xla_copy"]:
        settle()
        base = rss()
        if name in ("copy", "copy_mt"):
            run, _ = copy_floor(data, optimizer, 1 if name == "copy" else os.cpu_count() or 1)
            names[name] = "copy floor"
        elif name == "xla_copy":
            run = xla_new_tables(data, optimizer)
            names[name] = "XLA new tables"
        else:
            run, names[name], outs = make_variant(args, data, optimizer, name)
            if outs is not None:
                dig = digest(outs)
                del outs
                if name == "xla":
                    ref = dig
                elif name.startswith("ember"):
                    checks.append(f"check: {name} == XLA bit for bit (loss, tables, slots, "
                                  f"read-out): {dig == ref}")
        gc.collect()
        buffer_cache.release_idle()  # building's transient results: not the step's memory
        with PeakRss() as p:
            times = timed(run, args.reps)
        peaks[name] = (p.top - base) / 2**30 if name in args.variants else None
        med[name], mins[name] = statistics.median(times), min(times)
        load[name] = os.getloadavg()[0]
        if name in args.variants:
            flt[name] = faults(run)
        if name in ("xla_donated", "ember_donated"):
            prof[name] = profile(run, steps=2)
        del run
    return med, mins, names, peaks, prof, checks, load, flt
