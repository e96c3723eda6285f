"""The C++ core of the timing model (``cc/timing.cc``): same algorithm and results as
``timing.py``, for traces of DLRM-sized batches. ``simulate_fast(target, trace)`` returns the
same ``TimingReport`` (pass a ``TraceArrays`` to skip converting the trace's Python lists)."""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.cc_library import CPtr, ResultStruct, load, report_of, target_struct
from ember_xla.emulator.timing import TimingReport, case_cycles
from ember_xla.emulator.trace import CaseCost, Trace
from ember_xla.machines.config import Target


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
    res = ResultStruct()
    err = ctypes.create_string_buffer(512)
    rc = lib.ember_timing_simulate(
        ctypes.byref(tg), ctypes.c_int64(len(kind)), CPtr(kind.ctypes.data),
        *(CPtr(x.ctypes.data) for x in ints), CPtr(queued.ctypes.data), ctypes.c_int64(n_cases),
        CPtr(cyc.ctypes.data), CPtr(pops.ctypes.data), ctypes.byref(res), err,
        ctypes.c_int64(len(err)))
    del keep
    if rc:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    return report_of(target, res)
