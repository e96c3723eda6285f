"""The C++ core of the timing model (``native/timing.cc``, built into
``libember_emulator.so`` by ``pip install``): same algorithm and results as ``timing.py``, for
traces of DLRM-sized batches. ``simulate_fast(target, trace)`` returns the same
``TimingReport`` (pass a ``TraceArrays`` to skip converting the trace's Python lists). The
environment variable ``EMBER_XLA_EMULATOR_LIBRARY`` may name another build of the library."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ember_xla.emulator.memory import LevelStats
from ember_xla.emulator.target import Target
from ember_xla.emulator.timing import ProgramDoesNotFit, TimingReport, bound_of, case_cycles
from ember_xla.emulator.trace import CaseCost, Trace

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
            _lib = lib
        return _lib


@dataclasses.dataclass
class TraceArrays:
    """A trace as numpy arrays (the layout of ``trace.Trace``): what the C++ core reads without
    a per-event conversion. ``from_trace`` converts a ``Trace`` once."""

    kind: np.ndarray     # int8: LOAD, PUSH, TOKEN
    a: np.ndarray        # int64
    b: np.ndarray        # int64
    c: np.ndarray        # int64
    layer: np.ndarray    # int64
    queued: np.ndarray   # uint8
    cases: dict[int, CaseCost]

    @classmethod
    def from_trace(cls, trace: Trace) -> TraceArrays:
        return cls(np.asarray(trace.kind, np.int8),
                   *(np.asarray(x, np.int64) for x in (trace.a, trace.b, trace.c, trace.layer)),
                   np.asarray(trace.queued, np.uint8), dict(trace.cases))

    def __len__(self) -> int:
        return len(self.kind)


def target_struct(target: Target) -> tuple[_Target, list[np.ndarray]]:
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
    tg = _Target(1.0 / (a.addresses_per_cycle * a.lanes), target.dram_latency_cycles,
                 line_bytes / target.dram_bytes_per_cycle, a.data_queue_bytes * a.lanes,
                 a.outstanding_requests, a.control_queue_entries, line_bytes,
                 len(target.caches), sets.ctypes.data, ways.ctypes.data, lat.ctypes.data)
    return tg, [sets, ways, lat]


def report_of(target: Target, res: _Result) -> TimingReport:
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


def simulate_fast(target: Target, trace: Trace | TraceArrays) -> TimingReport:
    """``timing.simulate`` in C++: the same report. A ``TraceArrays`` skips the conversion of
    the trace's Python lists."""
    lib = load()
    arr = trace if isinstance(trace, TraceArrays) else TraceArrays.from_trace(trace)
    tg, keep = target_struct(target)
    kind = np.ascontiguousarray(arr.kind, np.int8)
    ints = [np.ascontiguousarray(x, np.int64) for x in (arr.a, arr.b, arr.c, arr.layer)]
    queued = np.ascontiguousarray(arr.queued, np.uint8)
    if not all(len(x) == len(kind) for x in (*ints, queued)):
        raise ValueError("trace arrays differ in length")
    tr = Trace()
    tr.cases = arr.cases
    costs = case_cycles(target, tr)
    n_cases = max(costs, default=-1) + 1
    cyc = np.zeros(n_cases, np.float64)
    pops = np.full(n_cases, -1, np.int64)   # -1: no such case
    for cid, cost in costs.items():
        if cid < 0:
            raise ValueError(f"case id {cid} is negative")
        cyc[cid] = cost
        pops[cid] = arr.cases[cid].pops
    res = _Result()
    err = ctypes.create_string_buffer(512)
    rc = lib.ember_timing_simulate(
        ctypes.byref(tg), ctypes.c_int64(len(kind)), _P(kind.ctypes.data),
        *(_P(x.ctypes.data) for x in ints), _P(queued.ctypes.data), ctypes.c_int64(n_cases),
        _P(cyc.ctypes.data), _P(pops.ctypes.data), ctypes.byref(res), err,
        ctypes.c_int64(len(err)))
    del keep
    if rc:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    return report_of(target, res)


# -- the C++ program executor (native/machine*.cc, access.cc, emulate.cc) -----------------------
def target_text(target: Target) -> str:
    """The compact one-line form of ``target`` the C++ emulator reads (native/target_text.h):
    the timing parameters as ``timing.py`` derives them (floats as repr, so both cores see the
    same doubles), the dispatch and op cycles, the cache levels."""
    from ember_xla.emulator.target import OP_CLASSES

    tg, (sets, ways, lat) = target_struct(target)
    ex = target.execute
    name = "".join(c if c.isalnum() or c in "_.-" else "_" for c in target.name) or "-"
    fields = ["ember-target", "1", name, repr(tg.agen_step), repr(tg.dram_latency),
              repr(tg.transfer), str(tg.queue_bytes), str(tg.outstanding), str(tg.ctrl_cap),
              str(tg.line_bytes), str(ex.callback_dispatch_cycles),
              *(str(ex.op_cycles[c]) for c in OP_CLASSES), str(len(sets))]
    for s, w, la in zip(sets, ways, lat, strict=True):
        fields += [str(int(s)), str(int(w)), str(int(la))]
    return " ".join(fields)


def _program_text(program: Any) -> str:
    if isinstance(program, str):
        return program
    from ember_xla.dae_target.program import to_text

    return to_text(program, one_line=True)


def _run(program: Any, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]] | None
         ) -> tuple[int, list[np.ndarray], Any]:
    """Run the program in C++; (handle, outputs). The caller frees the handle."""
    from ember_xla.dae_target.program import from_text
    from ember_xla.dae_target.program.model import scalar_type
    from ember_xla.ir.interpreter import InterpretError
    from ember_xla.ir.types import numpy_dtype

    text = _program_text(program)
    p = from_text(text) if isinstance(program, str) else program
    if len(inputs) != p.num_inputs:
        raise InterpretError(f"{p.name} takes {p.num_inputs} inputs, got {len(inputs)}")
    outs_spec = [a for a in p.args if a.role == "out"]
    if output_shapes is not None and len(output_shapes) != len(outs_spec):
        raise InterpretError(f"{p.name}: {len(output_shapes)} output shapes for "
                             f"{len(outs_spec)} outputs")
    arrays, outputs = [], []
    for k, a in enumerate(p.args):
        dt = numpy_dtype(scalar_type(a.dtype))
        if a.role == "in":
            x = np.asarray(inputs[k])
            if x.dtype != dt or x.ndim != len(a.shape):
                raise InterpretError(f"input {k} ({a.name}): got {x.dtype}{list(x.shape)}, the "
                                     f"program wants {a.dtype}{list(a.shape)}")
            arrays.append(np.ascontiguousarray(x))
        else:
            shape = tuple(output_shapes[k - p.num_inputs]) if output_shapes is not None \
                else a.shape
            if len(shape) != len(a.shape) or any(d < 0 for d in shape):
                raise InterpretError(f"output {a.name}: shape {list(shape)} unknown or of the "
                                     "wrong rank (pass output_shapes)")
            out = np.empty(shape, dtype=dt)
            arrays.append(out)
            outputs.append(out)
    lib = load()
    lib.ember_run_program.restype = ctypes.c_void_p
    ranks = np.array([x.ndim for x in arrays], np.int64)
    dims = np.array([d for x in arrays for d in x.shape] or [0], np.int64)
    ptrs = (ctypes.c_void_p * len(arrays))(*(x.ctypes.data for x in arrays))
    nbytes = np.array([x.nbytes for x in arrays], np.int64)
    err = ctypes.create_string_buffer(1024)
    h = lib.ember_run_program(text.encode(), ctypes.c_int64(len(arrays)),
                              _P(ranks.ctypes.data), _P(dims.ctypes.data), ptrs,
                              _P(nbytes.ctypes.data), err, ctypes.c_int64(len(err)))
    if not h:
        msg = err.value.decode()
        if msg.startswith("program: "):
            from ember_xla.dae_target.program import ProgramError

            raise ProgramError(msg.removeprefix("program: "))
        raise InterpretError(msg)
    return h, outputs, lib


def _cases(lib: ctypes.CDLL, h: int) -> dict[int, CaseCost]:
    from ember_xla.emulator.target import OP_CLASSES

    out = {}
    for k in range(lib.ember_run_n_cases(_P(h))):
        pops, fired, n_order = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        order = np.zeros(9, np.int64)
        totals = np.zeros(9, np.float64)
        lib.ember_run_case(_P(h), ctypes.c_int64(k), ctypes.byref(pops), ctypes.byref(fired),
                           ctypes.byref(n_order), _P(order.ctypes.data),
                           _P(totals.ctypes.data))
        ops: dict[str, int | float] = {}
        for c in order[:n_order.value]:
            mean = int(totals[c]) / fired.value
            ops[OP_CLASSES[c]] = int(mean) if mean == int(mean) else mean
        out[k] = CaseCost(ops, pops.value)
    return out


def run_program_fast(program: Any, inputs: Sequence[Any],
                     output_shapes: Sequence[Sequence[int]] | None = None
                     ) -> tuple[list[np.ndarray], Trace]:
    """``reference.run_program`` in C++: the same outputs and trace (for cross-checks; the
    trace is copied into a Python ``Trace``)."""
    h, outputs, lib = _run(program, inputs, output_shapes)
    try:
        n = lib.ember_run_trace_size(_P(h))
        kind = np.zeros(n, np.int8)
        cols = [np.zeros(n, np.int64) for _ in range(4)]
        queued = np.zeros(n, np.uint8)
        lib.ember_run_trace_copy(_P(h), _P(kind.ctypes.data), *(_P(c.ctypes.data) for c in cols),
                                 _P(queued.ctypes.data))
        tr = Trace(kind.tolist(), *(c.tolist() for c in cols), [bool(q) for q in queued],
                   _cases(lib, h))
    finally:
        lib.ember_run_free(_P(h))
    return outputs, tr


def emulate_program(program: Any, inputs: Sequence[Any], target: Target,
                    output_shapes: Sequence[Sequence[int]] | None = None
                    ) -> tuple[list[np.ndarray], TimingReport]:
    """Run ``program`` (a ``DaeProgram`` or its text) on ``inputs`` and time it on ``target``,
    all in C++ (the trace never reaches Python): (outputs, TimingReport), equal to
    ``reference.emulate``'s. ``ProgramDoesNotFit`` when the program does not fit the target:
    the binder's static checks first (``bind_program``), then the timing core's."""
    from ember_xla.dae_target.program import from_text
    from ember_xla.dae_target.program.bind import bind_program

    bind_program(from_text(program) if isinstance(program, str) else program, target)
    h, outputs, lib = _run(program, inputs, output_shapes)
    try:
        res = _Result()
        err = ctypes.create_string_buffer(1024)
        rc = lib.ember_run_simulate(_P(h), target_text(target).encode(), ctypes.byref(res), err,
                                    ctypes.c_int64(len(err)))
    finally:
        lib.ember_run_free(_P(h))
    if rc:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    return outputs, report_of(target, res)


def take_reports() -> list[tuple[str, TimingReport]]:
    """The timing reports the ``ember.emulate`` FFI target logged since the last call, in call
    order, as (cluster name, TimingReport); the log is cleared."""
    lib = load()
    out = []
    n = lib.ember_emulate_report_count()
    for i in range(n):
        name = ctypes.create_string_buffer(4096)
        ttext = ctypes.create_string_buffer(4096)
        res = _Result()
        if lib.ember_emulate_report(ctypes.c_int64(i), name, ctypes.c_int64(len(name)), ttext,
                                    ctypes.c_int64(len(ttext)), ctypes.byref(res)):
            break
        out.append((name.value.decode(), _report_of_text(ttext.value.decode(), res)))
    lib.ember_emulate_report_drop(ctypes.c_int64(len(out)))
    return out


def _report_of_text(text: str, res: _Result) -> TimingReport:
    """A report whose target is known only by its ``target_text`` (cache names are not in it:
    levels are named L1, L2, ...; the clock comes from the target registered by name)."""
    f = text.split()
    name, line_bytes, n_levels = f[2], int(f[9]), int(f[20])
    clock = _CLOCKS.get(name)
    stats = [LevelStats(_LEVEL_NAMES.get(name, {}).get(i, f"L{i + 1}"), res.level_hits[i],
                        res.level_misses[i]) for i in range(n_levels)]
    return TimingReport(
        cycles=res.cycles, seconds=res.cycles / (clock * 1e9) if clock else float("nan"),
        access_busy=res.access_busy, execute_busy=res.execute_busy,
        queue_full_stall=res.queue_full, queue_empty_stall=res.queue_empty,
        bytes_loaded=res.bytes_loaded, dram_bytes=res.dram_lines * line_bytes,
        cache_hit_rate={s.name: s.hit_rate for s in stats}, tokens=res.tokens,
        entries=res.entries,
        bound=bound_of(res.cycles, res.execute_busy, res.dram_busy, res.access_busy))


_CLOCKS: dict[str, float] = {}
_LEVEL_NAMES: dict[str, dict[int, str]] = {}


def emulate_attributes(program: Any, target: Target, cluster: str) -> dict[str, str]:
    """The attributes of an ``ember.emulate`` custom-call (docs/DAE_PROGRAM.md, "The FFI
    target"); remembers the target's clock and cache names for ``take_reports``."""
    text = target_text(target)
    _CLOCKS[text.split()[2]] = target.clock_ghz
    _LEVEL_NAMES[text.split()[2]] = {i: c.name for i, c in enumerate(target.caches)}
    return {"cluster": cluster, "program": _program_text(program), "target": text}
