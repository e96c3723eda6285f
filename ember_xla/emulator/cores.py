"""Several DAE programs on the cores of one machine: each program runs once in the C++ executor
(``run_kept``: outputs now, its trace kept in C++), then ``simulate_cores`` replays the traces
together (``cc/timing.cc``: SimulateCores): every core has its access unit, queues, execute unit
and private cache levels; the shared levels and DRAM (bandwidth, banks and rows) see all cores'
requests in time order. A core runs the programs given to it one after the other. One core
gives exactly the single-core timing of its programs' concatenated trace."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence
from typing import Any

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.cc_library import CPtr, ResultStruct, load, report_of
from ember_xla.emulator.executor_cc import _run, target_text
from ember_xla.emulator.timing import TimingReport
from ember_xla.machines.config import Target

ADDRESS_STRIDE = 1 << 40   # the address range of one cluster's buffers (disjoint per cluster)


class KeptRun:
    """A finished run of one program in the C++ executor: its outputs, and its trace kept in
    C++ for ``simulate_cores``. ``close()`` frees it (also on garbage collection)."""

    def __init__(self, handle: int, outputs: list[Any], lib: ctypes.CDLL) -> None:
        self.handle: int | None = handle
        self.outputs = outputs
        self._lib = lib

    def close(self) -> None:
        if self.handle is not None:
            self._lib.ember_run_free(CPtr(self.handle))
            self.handle = None

    def __del__(self) -> None:
        self.close()


def run_kept(program: Any, inputs: Sequence[Any],
             output_shapes: Sequence[Sequence[int]] | None = None) -> KeptRun:
    """Run ``program`` on ``inputs`` (the reference semantics, in C++) and keep its trace."""
    h, outputs, lib = _run(program, inputs, output_shapes)
    return KeptRun(h, outputs, lib)


@dataclasses.dataclass(frozen=True)
class OnCore:
    run: KeptRun
    core: int
    region: int        # address region: runs of one cluster share one, others get their own


def simulate_cores(target: Target, placed: Sequence[OnCore], cores: int | None = None
                   ) -> list[TimingReport]:
    """Time the runs together on ``cores`` cores (default: the target's); a core runs its runs
    in the order given. One ``TimingReport`` per core (its cycles from time 0; its hits and
    misses as its own requests saw every level). ``ProgramDoesNotFit`` with the reason."""
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
    err = ctypes.create_string_buffer(1024)
    rc = lib.ember_cores_simulate(target_text(target).encode(),
                                  ctypes.c_int64(target.private_levels), ctypes.c_int64(n),
                                  ctypes.c_int64(len(placed)), runs, core, offset, res, err,
                                  ctypes.c_int64(len(err)))
    if rc == 1:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    if rc:
        raise ValueError(err.value.decode())
    return [report_of(target, res[k]) for k in range(n)]
