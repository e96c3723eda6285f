"""Several DAE programs on the cores of one machine: each program runs once in the C++ executor
(``run_kept``: outputs now, its trace kept in C++), then ``simulate_cores`` replays the traces
together (``cc/cores.cc``: SimulateCores): every core has its access unit, queues, execute unit
and private cache levels; the shared levels and DRAM (bandwidth, banks and rows) see all cores'
requests in time order. A core runs the programs given to it one after the other. One core
gives exactly the single-core timing of its programs' concatenated trace."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.cc_library import CPtr, ResultStruct, load, report_of
from ember_xla.emulator.executor_cc import _run, target_text
from ember_xla.emulator.timing import TimingReport
from ember_xla.machines.config import Target

ADDRESS_STRIDE = 1 << 40   # the address range of one cluster's buffers (disjoint per cluster)


class KeptRun:
    """A finished run of one program in the C++ executor: its outputs (none in the addresses
    mode), and its trace kept in C++ for ``simulate_cores``. ``close()`` frees it (also on
    garbage collection)."""

    def __init__(self, handle: int, outputs: list[Any], lib: ctypes.CDLL,
                 mode: str = "full") -> None:
        self.handle: int | None = handle
        self.outputs = outputs
        self.mode = mode
        self._lib = lib

    def trace_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The trace's (kind, a, b, layer) columns (LOAD: a address, b bytes)."""
        assert self.handle is not None, "closed"
        lib, h = self._lib, CPtr(self.handle)
        n = lib.ember_run_trace_size(h)
        kind = np.zeros(n, np.int8)
        cols = [np.zeros(n, np.int64) for _ in range(4)]
        queued = np.zeros(n, np.uint8)
        lib.ember_run_trace_copy(h, CPtr(kind.ctypes.data), *(CPtr(c.ctypes.data) for c in cols),
                                 CPtr(queued.ctypes.data))
        return kind, cols[0], cols[1], cols[3]

    def case_firings(self, target: Target) -> list[tuple[int, float]]:
        """Per callback case: (times fired, cycles of one firing on ``target``'s core)."""
        from ember_xla.machines.config import OP_CLASSES

        assert self.handle is not None, "closed"
        lib, h, ex = self._lib, CPtr(self.handle), target.execute
        out = []
        for k in range(lib.ember_run_n_cases(h)):
            pops, fired, n_order = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
            order = np.zeros(9, np.int64)
            totals = np.zeros(9, np.float64)
            lib.ember_run_case(h, ctypes.c_int64(k), ctypes.byref(pops), ctypes.byref(fired),
                               ctypes.byref(n_order), CPtr(order.ctypes.data),
                               CPtr(totals.ctypes.data))
            f = fired.value
            ops = sum(totals[c] * ex.op_cycles[OP_CLASSES[c]] for c in order[:n_order.value])
            out.append((f, ex.callback_dispatch_cycles + (ops / f if f else 0.0)))
        return out

    def close(self) -> None:
        if self.handle is not None:
            self._lib.ember_run_free(CPtr(self.handle))
            self.handle = None

    def __del__(self) -> None:
        self.close()


def run_kept(program: Any, inputs: Sequence[Any],
             output_shapes: Sequence[Sequence[int]] | None = None, mode: str = "full"
             ) -> KeptRun:
    """Run ``program`` on ``inputs`` (the reference semantics, in C++) and keep its trace;
    ``mode="addresses"``: the same trace without computing values (no outputs;
    ``executor_cc.AddressesUnsupported`` when the program needs the full mode)."""
    h, outputs, lib = _run(program, inputs, output_shapes, mode)
    return KeptRun(h, outputs, lib, mode)


@dataclasses.dataclass(frozen=True)
class OnCore:
    run: KeptRun
    core: int
    region: int        # address region: runs of one cluster share one, others get their own


@dataclasses.dataclass
class CoresTiming:
    cores: list[TimingReport]      # per core: its cycles from time 0, its own hits and misses
    ends: list[float]              # per run (in the order given): the cycle its core's
                                   # execute unit finished it

    @property
    def makespan(self) -> float:
        return max((r.cycles for r in self.cores), default=0.0)


def simulate_cores(target: Target, placed: Sequence[OnCore], cores: int | None = None
                   ) -> CoresTiming:
    """Time the runs together on ``cores`` cores (default: the target's); a core runs its runs
    in the order given. ``ProgramDoesNotFit`` with the reason."""
    n = target.cores if cores is None else cores
    if n < 1:
        raise ValueError(f"{n} cores: expected at least one")
    for p in placed:
        if not 0 <= p.core < n:
            raise ValueError(f"core {p.core} is not one of the {n} cores")
        if p.run.handle is None:
            raise ValueError("a run was closed before it was timed")
    lib = load()
    runs = (ctypes.c_void_p * max(len(placed), 1))(*(p.run.handle for p in placed))
    core = (ctypes.c_int64 * max(len(placed), 1))(*(p.core for p in placed))
    offset = (ctypes.c_int64 * max(len(placed), 1))(*(p.region * ADDRESS_STRIDE
                                                       for p in placed))
    res = (ResultStruct * n)()
    ends = (ctypes.c_double * max(len(placed), 1))()
    err = ctypes.create_string_buffer(1024)
    rc = lib.ember_cores_simulate(target_text(target).encode(),
                                  ctypes.c_int64(target.private_levels), ctypes.c_int64(n),
                                  ctypes.c_int64(len(placed)), runs, core, offset, res, ends,
                                  err, ctypes.c_int64(len(err)))
    if rc == 1:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    if rc:
        raise ValueError(err.value.decode())
    return CoresTiming([report_of(target, res[k]) for k in range(n)],
                       [float(ends[i]) for i in range(len(placed))])
