"""Run an NPU program: per core, an ordered list of ``Work`` pieces (a table's bags
``[bag_start, bag_stop)`` with a lookup strategy) plus the rows each core holds in its L1.
Timing is event-driven: every core is a generator of global-memory transfers; the arbiter
serves them in time order, each occupying the shared global memory for ``bytes /
global_bpc`` cycles and its core's port for ``bytes / core_bpc``, data ready ``latency``
later. Functional results come from ``functional.py`` (same pieces, same order)."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.emulator.npu.core import Core, run_piece
from ember_xla.emulator.npu.functional import pooled_outputs
from ember_xla.emulator.npu.workload import Bags, Table
from ember_xla.machines.npu import STRATEGIES, Machine, check_preload

PRELOAD_DESCRIPTOR_BYTES = 65536   # a contiguous (whole-table) preload moves 64 KiB per DMA


class ScratchpadOverflow(ValueError):
    """A core's L1-resident rows exceed its scratchpad; the message says which core and why."""


@dataclasses.dataclass(frozen=True)
class Work:
    table: int
    bag_start: int
    bag_stop: int
    strategy: str


@dataclasses.dataclass
class CoreReport:
    core: int
    cycles: float
    pieces: int
    lookups: int
    gm_read_bytes: int
    gm_write_bytes: int
    l1_reads: int
    unique_rows: int
    vector_cycles: float
    l1_bytes_used: int
    preload_cycles: float


@dataclasses.dataclass
class NpuReport:
    makespan_cycles: float
    makespan_seconds: float
    preload_mode: str
    preload_cycles: float          # model mode: the one-time load (not in the makespan)
    global_bytes: int
    global_utilization: float
    cores: list[CoreReport]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_program(m: Machine, tables: Sequence[Table], programs: Sequence[Sequence[Work]],
                  resident: Sequence[dict[int, np.ndarray]]) -> None:
    """Refuse a program the machine cannot run: cores, strategies, L1 capacity."""
    if len(programs) > m.cores or len(resident) > m.cores:
        raise ValueError(f"program uses {max(len(programs), len(resident))} cores; the target "
                         f"has {m.cores}")
    for c, works in enumerate(programs):
        for w in works:
            if w.strategy not in STRATEGIES:
                raise ValueError(f"core {c}: strategy {w.strategy!r}: expected one of "
                                 f"{', '.join(STRATEGIES)}")
            if not 0 <= w.table < len(tables):
                raise ValueError(f"core {c}: table {w.table} does not exist")
    for c, res in enumerate(resident):
        used = sum(len(rows) * tables[t].row_bytes for t, rows in res.items())
        if used > m.l1_bytes:
            raise ScratchpadOverflow(
                f"core {c}: L1-resident rows need {used} bytes; the scratchpad holds "
                f"{m.l1_bytes} bytes")


def _preload(core: Core, tables: Sequence[Table], res: dict[int, np.ndarray]):
    t = core.scalar
    for ti, rows in sorted(res.items()):
        rb = tables[ti].row_bytes
        if len(rows) == tables[ti].rows:          # the whole table: contiguous copies
            total = len(rows) * rb
            sizes = [min(PRELOAD_DESCRIPTOR_BYTES, total - o)
                     for o in range(0, total, PRELOAD_DESCRIPTOR_BYTES)]
        else:                                     # scattered hot rows: one DMA per row
            sizes = [rb] * len(rows)
        for n in sizes:
            t, _ = yield from core.gm(t, n)
            t += core.m.issue
    core.scalar = core.vec = max(t, core.end)


def _core_program(core: Core, tables, batches, works: Sequence[Work],
                  masks: dict[int, np.ndarray], res, preload_here: bool):
    if preload_here:
        yield from _preload(core, tables, res)
    core.stats["preload_cycles"] = core.finish
    for w in works:
        b = batches[w.table]
        lo, hi = int(b.offsets[w.bag_start]), int(b.offsets[w.bag_stop])
        lens = np.diff(b.offsets[w.bag_start:w.bag_stop + 1])
        yield from run_piece(core, w.strategy, b.ids[lo:hi], lens, tables[w.table].row_bytes,
                             masks.get(w.table))
    yield from core.flush_writes()


def _arbitrate(m: Machine, cores: list[Core], gens: list) -> tuple[float, float]:
    """Serve every core's transfers in time order; returns (global busy cycles, end)."""
    heap: list[tuple[float, int, int]] = []
    pending: dict[int, tuple[float, int]] = {}
    for c, g in enumerate(gens):
        try:
            pending[c] = next(g)
            heapq.heappush(heap, (pending[c][0], c, pending[c][1]))
        except StopIteration:
            pass
    gfree = busy = 0.0
    while heap:
        t, c, n = heapq.heappop(heap)
        s = max(t, gfree)
        gfree = s + n / m.global_bpc
        busy += n / m.global_bpc
        try:
            req = gens[c].send((s, s + n / m.core_bpc + m.latency))
            heapq.heappush(heap, (req[0], c, req[1]))
        except StopIteration:
            pass
    return busy, max((k.finish for k in cores), default=0.0)


def emulate(m: Machine, tables: Sequence[Table], batches: Sequence[Bags],
            programs: Sequence[Sequence[Work]], resident: Sequence[dict[int, np.ndarray]],
            preload: str | None = None, functional: bool = True
            ) -> tuple[list[np.ndarray] | None, NpuReport]:
    """Emulate ``programs`` (one list of pieces per core; ``resident[c]``: table -> rows in
    core c's L1). Returns the pooled outputs per table (None if ``functional`` is off) and the
    per-core report. ``preload``: "model" (default of the target) or "batch"."""
    mode = check_preload(preload or m.preload)
    programs = list(programs) + [[] for _ in range(m.cores - len(programs))]
    resident = list(resident) + [{} for _ in range(m.cores - len(resident))]
    check_program(m, tables, programs, resident)
    for t, b in zip(tables, batches, strict=True):
        b.check(t)
    masks = []
    for res in resident:
        mk = {}
        for ti, rows in res.items():
            mask = np.zeros(tables[ti].rows, dtype=bool)
            mask[np.asarray(rows, dtype=np.int64)] = True
            mk[ti] = mask
        masks.append(mk)
    preload_cycles = 0.0
    if mode == "model":       # the one-time load, emulated on its own
        pc = [Core(m, c) for c in range(m.cores)]
        _, preload_cycles = _arbitrate(m, pc, [_preload(k, tables, r)
                                               for k, r in zip(pc, resident, strict=True)])
    cores = [Core(m, c) for c in range(m.cores)]
    gens = [_core_program(k, tables, batches, w, mk, r, mode == "batch")
            for k, w, mk, r in zip(cores, programs, masks, resident, strict=True)]
    busy, end = _arbitrate(m, cores, gens)
    reps = [CoreReport(
        core=k.cid, cycles=k.finish, pieces=k.stats["pieces"], lookups=k.stats["lookups"],
        gm_read_bytes=k.stats["gm_read_bytes"], gm_write_bytes=k.stats["gm_write_bytes"],
        l1_reads=k.stats["l1_reads"], unique_rows=k.stats["unique_rows"],
        vector_cycles=float(k.stats["vector_cycles"]),
        l1_bytes_used=sum(len(r) * tables[t].row_bytes for t, r in resident[k.cid].items()),
        preload_cycles=float(k.stats["preload_cycles"]) if mode == "batch" else 0.0)
        for k in cores]
    total = sum(r.gm_read_bytes + r.gm_write_bytes for r in reps)
    report = NpuReport(end, m.seconds(end), mode, preload_cycles, total,
                       busy / end if end else 0.0, reps)
    outs = pooled_outputs(tables, batches, programs) if functional else None
    return outs, report
