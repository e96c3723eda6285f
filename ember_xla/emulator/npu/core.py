"""One NPU core's timing state and its four lookup programs (Python generators).

A core has a scalar unit (reads indices, builds DMA descriptors), a DMA engine (at most
``outstanding`` descriptors in flight, a per-core port of ``core_bpc`` bytes/cycle, reads from
global memory without a data cache, whole granules), an L1 read port (scratchpad -> unified
buffer) and a vector unit (row chunks of ``vector_bytes``). Programs ``yield (t, bytes)`` for
every global-memory transfer and receive ``(start, done)`` from the shared memory arbiter
(``run.py``), so transfers of all cores meet there in time order. Output rows are written back
in blocks, asynchronously; the core finishes when its last write lands.

Strategies for one piece (a table's bags ``[b0, b1)``), every bag pooled in index order:
- ``gm``: one row per DMA, double-buffered (two row buffers), vector add per row;
- ``l1``: the same, rows resident in L1 read from there, the others from global memory;
- ``gm_ub``: chunks of ``stage_rows`` indices; each distinct row of a chunk fetched once
  (hash dedup on the scalar unit) into a UB half, up to ``outstanding`` in flight; the vector
  unit gathers and pools the chunk while the next one is staged (double-buffered halves);
- ``l1_ub``: as ``gm_ub``, distinct resident rows copied L1 -> UB, the others from GM."""

from __future__ import annotations

import collections
import heapq
from collections.abc import Generator

import numpy as np

from ember_xla.machines.npu import Machine

Req = Generator[tuple[float, int], tuple[float, float], float]


class Core:
    def __init__(self, m: Machine, cid: int) -> None:
        self.m, self.cid = m, cid
        self.scalar = self.vec = self.end = 0.0
        self.port = self.l1_port = 0.0
        self.inflight: list[float] = []
        self.writes: collections.deque[tuple[float, int]] = collections.deque()
        self.out_pending = 0
        self.stats = collections.Counter()

    # -- transfers ----------------------------------------------------------------------------
    def gm(self, t: float, nbytes: int) -> Generator[tuple[float, int], tuple[float, float],
                                                     tuple[float, float]]:
        """A global-memory transfer wanted at ``t``; returns (issue time, data-ready time)."""
        while self.writes and self.writes[0][0] <= t:
            yield from self._transfer(*self.writes.popleft(), write=True)
        return (yield from self._transfer(t, nbytes))

    def _transfer(self, t: float, nbytes: int, write: bool = False
                  ) -> Generator[tuple[float, int], tuple[float, float], tuple[float, float]]:
        n = self.m.xfer(nbytes)
        q = self.inflight
        while q and q[0] <= t:
            heapq.heappop(q)
        if len(q) >= self.m.outstanding:
            t = max(t, heapq.heappop(q))
        s, done = yield (max(t, self.port), n)
        self.port = s + n / self.m.core_bpc
        heapq.heappush(q, done)
        self.end = max(self.end, done)
        self.stats["gm_write_bytes" if write else "gm_read_bytes"] += n
        self.stats["gm_writes" if write else "gm_reads"] += 1
        return t, done

    def flush_writes(self) -> Generator[tuple[float, int], tuple[float, float], None]:
        while self.writes:
            yield from self._transfer(*self.writes.popleft(), write=True)

    def l1(self, t: float, nbytes: int) -> float:
        """A scratchpad -> UB copy wanted at ``t``; returns its data-ready time."""
        s = max(t, self.l1_port)
        busy = nbytes / self.m.l1_bpc
        self.l1_port = s + busy
        self.stats["l1_reads"] += 1
        return s + self.m.l1_latency + busy

    # -- outputs ------------------------------------------------------------------------------
    def bag_done(self, row_bytes: int, store: int) -> None:
        self.vec += store
        self.stats["vector_cycles"] += store
        self.out_pending += 1
        if self.out_pending == self.m.out_block_rows(row_bytes):
            self.flush_outputs(row_bytes)

    def flush_outputs(self, row_bytes: int) -> None:
        if self.out_pending:
            self.writes.append((self.vec, self.out_pending * row_bytes))
            self.out_pending = 0

    @property
    def finish(self) -> float:
        return max(self.scalar, self.vec, self.end)


def run_piece(core: Core, strategy: str, ids: np.ndarray, lens: np.ndarray, row_bytes: int,
              resident: np.ndarray | None) -> Generator[tuple[float, int], tuple[float, float],
                                                       None]:
    """One piece on ``core`` (``resident``: bool mask over the table's rows held in L1)."""
    m = core.m
    core.scalar = max(core.scalar, core.vec) + m.setup
    _, done = yield from core.gm(core.scalar, 4 * (len(ids) + len(lens) + 1))  # stage ids
    core.scalar = done
    core.vec = max(core.vec, done)
    core.stats["pieces"] += 1
    core.stats["lookups"] += len(ids)
    hot = resident if strategy in ("l1", "l1_ub") else None
    if strategy in ("gm", "l1"):
        yield from _row_at_a_time(core, ids, lens, row_bytes, hot)
    else:
        yield from _staged(core, ids, lens, row_bytes, hot)
    core.flush_outputs(row_bytes)


def _row_at_a_time(core: Core, ids: np.ndarray, lens: np.ndarray, row_bytes: int,
                   hot: np.ndarray | None) -> Generator[tuple[float, int], tuple[float, float],
                                                       None]:
    m = core.m
    ch = m.chunks(row_bytes)
    add, init, store = ch * m.op_add, ch * m.op_store, ch * m.op_store
    free = collections.deque([0.0, 0.0], maxlen=2)   # vector done with row j-2: buffer free
    pos = 0
    id_list = ids.tolist()
    for n in lens.tolist():
        core.vec += init
        for r in id_list[pos:pos + n]:
            t = max(core.scalar + m.index, free[0])
            if hot is not None and hot[r]:
                issued, done = t, core.l1(t, row_bytes)
            else:
                issued, done = yield from core.gm(t, row_bytes)
            core.scalar = issued + m.issue
            core.vec = max(core.vec, done) + add
            free.append(core.vec)
        pos += n
        core.stats["vector_cycles"] += init + n * add
        core.bag_done(row_bytes, store)


def _staged(core: Core, ids: np.ndarray, lens: np.ndarray, row_bytes: int,
            hot: np.ndarray | None) -> Generator[tuple[float, int], tuple[float, float], None]:
    m = core.m
    ch = m.chunks(row_bytes)
    per_row, init, store = ch * (m.op_load + m.op_add), ch * m.op_store, ch * m.op_store
    c = m.stage_rows(row_bytes)
    ends = np.cumsum(lens)                  # bag b ends after position ends[b]
    half_free = collections.deque([0.0, 0.0], maxlen=2)
    id_list = ids.tolist()
    b = 0
    nb = len(lens)
    while b < nb and lens[b] == 0:          # leading empty bags
        core.vec += init
        core.bag_done(row_bytes, store)
        b += 1
    for k in range(0, len(id_list), c):
        chunk = id_list[k:k + c]
        t = max(core.scalar, half_free[0])
        seen: set[int] = set()
        ready = t
        for r in chunk:
            t += m.index
            if r in seen:
                continue
            seen.add(r)
            if hot is not None and hot[r]:
                done = core.l1(t, row_bytes)
            else:
                t, done = yield from core.gm(t, row_bytes)
            t += m.issue
            ready = max(ready, done)
        core.scalar = t
        core.stats["unique_rows"] += len(seen)
        v = max(core.vec, ready) + len(chunk) * per_row
        core.stats["vector_cycles"] += len(chunk) * per_row
        core.vec = v
        stop = k + len(chunk)
        while b < nb and ends[b] <= stop:   # bags that end in this chunk (and empty ones)
            core.vec += init
            core.stats["vector_cycles"] += init
            core.bag_done(row_bytes, store)
            b += 1
        half_free.append(core.vec)
    while b < nb:                           # trailing empty bags
        core.vec += init
        core.bag_done(row_bytes, store)
        b += 1
