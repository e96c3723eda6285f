"""The compiled emulator core (``cc/*.cc``, built into ``libember_emulator.so`` by
``pip install``) as Python sees it: finding and loading the library, the C structs of a target's
timing parameters and of a timing result, and the ``TimingReport`` of a result. The environment
variable ``EMBER_XLA_EMULATOR_LIBRARY`` may name another build of the library."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import numpy as np

from ember_xla import ffi
from ember_xla.emulator.memory import LevelStats, dram_timing
from ember_xla.emulator.timing import TimingReport, bound_of
from ember_xla.machines.config import Target

LIBRARY_NAME = "libember_emulator.so"
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
CPtr = ctypes.c_void_p


class TargetStruct(ctypes.Structure):
    _fields_ = [("agen_step", ctypes.c_double), ("dram_latency", ctypes.c_double),
                ("transfer", ctypes.c_double), ("queue_bytes", ctypes.c_int64),
                ("outstanding", ctypes.c_int64), ("ctrl_cap", ctypes.c_int64),
                ("line_bytes", ctypes.c_int64), ("n_levels", ctypes.c_int64),
                ("level_sets", CPtr), ("level_ways", CPtr), ("level_latency", CPtr),
                ("dram_channels", ctypes.c_int64), ("dram_banks", ctypes.c_int64),
                ("dram_row_lines", ctypes.c_int64), ("dram_row_hit", ctypes.c_double),
                ("dram_row_miss", ctypes.c_double)]


class ResultStruct(ctypes.Structure):
    _fields_ = [("cycles", ctypes.c_double), ("access_busy", ctypes.c_double),
                ("execute_busy", ctypes.c_double), ("queue_full", ctypes.c_double),
                ("queue_empty", ctypes.c_double), ("dram_busy", ctypes.c_double),
                ("dram_lines", ctypes.c_int64), ("tokens", ctypes.c_int64),
                ("entries", ctypes.c_int64), ("bytes_loaded", ctypes.c_int64),
                ("level_hits", ctypes.c_int64 * 8),
                ("level_misses", ctypes.c_int64 * 8)]


class EmulatorLibraryMissing(ImportError):
    """The compiled emulator core is not installed (package not built)."""


def library_path() -> Path:
    override = os.environ.get("EMBER_XLA_EMULATOR_LIBRARY")
    if override:
        return Path(override).resolve()
    from ember_xla.emulator import __path__ as package_path  # an editable install's dirs too
    from ember_xla.util import libpath

    return libpath.find(__file__, package_path, LIBRARY_NAME)


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
            lib.ember_run_program.restype = ctypes.c_void_p
            lib.ember_run_program_mode.restype = ctypes.c_void_p
            for f in ("ember_run_trace_size", "ember_run_n_cases", "ember_emulate_report_count"):
                getattr(lib, f).restype = ctypes.c_int64
            _lib = lib
        return _lib


def target_struct(target: Target) -> tuple[TargetStruct, list[np.ndarray]]:
    """The timing parameters of ``target`` for the C ABI (and the arrays it points into, which
    the caller keeps alive during the call)."""
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
    d = dram_timing(target)
    tg = TargetStruct(1.0 / (a.addresses_per_cycle * a.lanes), d.latency, d.transfer,
                      a.data_queue_bytes * a.lanes, a.outstanding_requests,
                      a.control_queue_entries, line_bytes, len(target.caches), sets.ctypes.data,
                      ways.ctypes.data, lat.ctypes.data, d.channels, d.banks, d.row_lines,
                      d.row_hit, d.row_miss)
    return tg, [sets, ways, lat]


def report_of(target: Target, res: ResultStruct) -> TimingReport:
    """The ``TimingReport`` of a C result struct (derived fields as ``timing.py`` makes them)."""
    stats = [LevelStats(c.name, res.level_hits[i], res.level_misses[i])
             for i, c in enumerate(target.caches)]
    cycles = res.cycles
    return TimingReport(
        cycles=cycles, seconds=cycles / (target.clock_ghz * 1e9),
        access_busy=res.access_busy, execute_busy=res.execute_busy,
        queue_full_stall=res.queue_full, queue_empty_stall=res.queue_empty,
        bytes_loaded=res.bytes_loaded, dram_bytes=res.dram_lines * target.caches[0].line_bytes,
        cache_hit_rate={s.name: s.hit_rate for s in stats},
        tokens=res.tokens, entries=res.entries,
        bound=bound_of(cycles, res.execute_busy, res.dram_busy, res.access_busy))


ffi.provide("emulator", load, required=False)  # ember.emulate (cc/emulate.cc)
