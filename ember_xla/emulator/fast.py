"""The C++ core of the timing model (``native/timing.cc``, built into
``libember_emulator.so`` by ``pip install``): same algorithm and results as ``timing.py``, for
traces of DLRM-sized batches. ``simulate_fast(target, trace)`` returns the same
``TimingReport``; the environment variable ``EMBER_XLA_EMULATOR_LIBRARY`` may name another
build of the library."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import numpy as np

from ember_xla.emulator.memory import LevelStats
from ember_xla.emulator.target import Target
from ember_xla.emulator.timing import ProgramDoesNotFit, TimingReport, bound_of, case_cycles
from ember_xla.emulator.trace import LOAD, Trace

LIBRARY_NAME = "libember_emulator.so"
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_P = ctypes.c_void_p


class _Target(ctypes.Structure):
    _fields_ = [("agen_step", ctypes.c_double), ("dram_latency", ctypes.c_double),
                ("transfer", ctypes.c_double), ("queue_bytes", ctypes.c_int64),
                ("outstanding", ctypes.c_int64), ("ctrl_cap", ctypes.c_int64),
                ("line_bytes", ctypes.c_int64), ("n_levels", ctypes.c_int64),
                ("level_sets", _P), ("level_ways", _P), ("level_latency", _P)]


class _Result(ctypes.Structure):
    _fields_ = [("cycles", ctypes.c_double), ("access_busy", ctypes.c_double),
                ("execute_busy", ctypes.c_double), ("queue_full", ctypes.c_double),
                ("queue_empty", ctypes.c_double), ("dram_busy", ctypes.c_double),
                ("dram_lines", ctypes.c_int64), ("tokens", ctypes.c_int64),
                ("entries", ctypes.c_int64), ("level_hits", ctypes.c_int64 * 8),
                ("level_misses", ctypes.c_int64 * 8)]


class EmulatorLibraryMissing(ImportError):
    """The compiled emulator core is not installed (package not built)."""


def library_path() -> Path:
    override = os.environ.get("EMBER_XLA_EMULATOR_LIBRARY")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().with_name(LIBRARY_NAME)


def load() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not path.is_file():
                raise EmulatorLibraryMissing(
                    f"ember-xla's emulator core ({LIBRARY_NAME}) was not found in "
                    f"{path.parent}: it is compiled by `pip install .`")
            lib = ctypes.CDLL(str(path))
            lib.ember_timing_simulate.restype = ctypes.c_int
            _lib = lib
        return _lib


def simulate_fast(target: Target, trace: Trace) -> TimingReport:
    lib = load()
    if len(target.caches) > 8:
        raise ValueError(f"{target.source}: the fast core models at most 8 cache levels")
    lines = {c.line_bytes for c in target.caches}
    if len(lines) != 1:
        raise ValueError(f"{target.source}: all cache levels must share one line size")
    line_bytes = lines.pop()
    sets = np.array([c.size_bytes // (c.line_bytes * c.associativity) for c in target.caches],
                    np.int64)
    ways = np.array([c.associativity for c in target.caches], np.int64)
    lat = np.array([c.latency_cycles for c in target.caches], np.int64)
    a = target.access
    tg = _Target(1.0 / (a.addresses_per_cycle * a.lanes), target.dram_latency_cycles,
                 line_bytes / target.dram_bytes_per_cycle, a.data_queue_bytes * a.lanes,
                 a.outstanding_requests, a.control_queue_entries, line_bytes,
                 len(target.caches), sets.ctypes.data, ways.ctypes.data, lat.ctypes.data)
    kind = np.asarray(trace.kind, np.int8)
    arr = [np.asarray(x, np.int64) for x in (trace.a, trace.b, trace.c, trace.layer)]
    queued = np.asarray(trace.queued, np.uint8)
    costs = case_cycles(target, trace)
    n_cases = max(costs, default=-1) + 1
    cyc = np.zeros(n_cases, np.float64)
    pops = np.zeros(n_cases, np.int64)
    for cid, cost in costs.items():
        cyc[cid] = cost
        pops[cid] = trace.cases[cid].pops
    res = _Result()
    err = ctypes.create_string_buffer(512)
    rc = lib.ember_timing_simulate(
        ctypes.byref(tg), ctypes.c_int64(len(kind)), _P(kind.ctypes.data),
        *(_P(x.ctypes.data) for x in arr), _P(queued.ctypes.data), ctypes.c_int64(n_cases),
        _P(cyc.ctypes.data), _P(pops.ctypes.data), ctypes.byref(res), err,
        ctypes.c_int64(len(err)))
    if rc:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    stats = [LevelStats(c.name, res.level_hits[i], res.level_misses[i])
             for i, c in enumerate(target.caches)]
    cycles = res.cycles
    return TimingReport(
        cycles=cycles, seconds=cycles / (target.clock_ghz * 1e9),
        access_busy=res.access_busy, execute_busy=res.execute_busy,
        queue_full_stall=res.queue_full, queue_empty_stall=res.queue_empty,
        bytes_loaded=int(np.asarray(trace.b, np.int64)[kind == LOAD].sum()),
        dram_bytes=res.dram_lines * line_bytes,
        cache_hit_rate={s.name: s.hit_rate for s in stats},
        tokens=res.tokens, entries=res.entries,
        bound=bound_of(cycles, res.execute_busy, res.dram_busy, res.access_busy))
