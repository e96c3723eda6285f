"""The analytic cost model of a piece (a table's share on one core with one strategy and a
hot set of ``h`` rows): ``fixed + per_id x lookups + per_bag x bags`` cycles, plus its
global-memory bytes and L1 footprint. Every term comes from the target (``Machine``) and the
table's index statistics (``TableStats``: hit fraction of the hot set, distinct rows per chunk):

- row at a time (``gm``, ``l1``): two row buffers; a row's fetch waits for the vector unit to
  free the buffer of the row two back, so the period is about (fetch latency + add) / 2. Hits
  and misses mix, so the period is the steady state of that recurrence on a hit pattern of
  the table's hit fraction (a fixed pseudo-random pattern of 1024 lookups, memoised).
- staged (``gm_ub``, ``l1_ub``): per chunk of ``stage_rows`` lookups the scalar unit reads
  every index and issues one descriptor per distinct row, the DMA engine sustains ``outstanding``
  / latency rows per cycle (or its port bandwidth), the L1 port its bandwidth; the vector unit
  gathers and pools every lookup. Two UB halves overlap staging and pooling: the cost per
  lookup is the steady state of the chunk recurrence over the table's own chunks (their
  distinct hot and other rows), each chunk weighing by its lookups.
- preload of the hot set: one 64 KiB DMA per block for a whole table, one DMA per row for a
  scattered hot set, ``outstanding`` in flight.
Contention for the shared global memory is applied per plan (``predict.py``)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ember_xla.emulator.npu.run import PRELOAD_DESCRIPTOR_BYTES
from ember_xla.machines.npu import Machine
from ember_xla.placement.stats import TableStats

RESIDENT = {"gm": False, "gm_ub": False, "l1": True, "l1_ub": True}


@dataclasses.dataclass(frozen=True)
class Rate:
    fixed: float              # setup, index staging, pipeline fill, last write latency
    per_id: float             # steady-state cycles per lookup
    per_bag: float
    first_ids: int            # the first chunk's lookups (staged strategies) ...
    first_extra: float        # ... cost this much more each (its phases do not overlap yet)
    gm_per_id: float          # global-memory bytes per lookup
    gm_per_bag: float
    port_per_id: float        # cycles of the core's DMA port per lookup (reads)
    port_per_bag: float       # ... per bag (its output row written back)
    last_write: float         # port cycles of one output row of the final block write
    out_block: int            # output rows per block write
    l1_bytes: int             # scratchpad footprint of the hot set on one core
    preload: float            # cycles to load the hot set into one core's L1
    preload_gm: float         # bytes that load moves
    write_latency: float      # latency of the last output write (part of ``fixed``)
    fill: float = 0.0         # part of ``fixed`` only a piece with lookups pays (row fetches)

    def cycles(self, n_ids: int, n_bags: int) -> float:
        """Pipeline time or the DMA port's busy time, whichever is longer, plus the fixed
        part and the final output block's write."""
        if n_ids == 0 and n_bags == 0:
            return 0.0
        pipe, port = self._pipe_port(n_ids, n_bags)
        return (self.fixed - (0.0 if n_ids else self.fill) + max(pipe, port)
                + self.last_write * min(n_bags, self.out_block))

    def _pipe_port(self, n_ids: int, n_bags: int) -> tuple[float, float]:
        """(pipeline cycles, port cycles before the final output block): that block is
        written after the last bag is pooled, so it follows both, not counted in the port."""
        pipe = (self.per_id * n_ids + self.first_extra * min(n_ids, self.first_ids)
                + self.per_bag * n_bags)
        port = (self.port_per_id * n_ids
                + self.port_per_bag * (n_bags - min(n_bags, self.out_block)))
        return pipe, port

    def tail(self, n_ids: int, n_bags: int) -> float:
        """Cycles of ``cycles`` after the vector unit is done: output writes still draining
        (the latency of the last, the port time of the final block, any port backlog). The
        next piece on the core starts its setup meanwhile."""
        pipe, port = self._pipe_port(n_ids, n_bags)
        return self.write_latency + max(0.0, port - pipe) \
            + self.last_write * min(n_bags, self.out_block)

    def linear(self, n_ids: float, n_bags: float) -> float:
        """An upper bound of ``cycles`` linear in the share (the first-chunk surcharge
        folded into the fixed part), for the exact MILP."""
        pipe = self.per_id * n_ids + self.per_bag * n_bags
        port = self.port_per_id * n_ids + self.port_per_bag * n_bags
        return (self.fixed + self.first_extra * self.first_ids + max(pipe, port)
                + self.last_write * self.out_block)

    def gm_bytes(self, n_ids: int, n_bags: int) -> float:
        return self.gm_per_id * n_ids + self.gm_per_bag * n_bags


class CostModel:
    def __init__(self, m: Machine) -> None:
        self.m = m
        self._rates: dict[tuple[int, str, int], tuple[TableStats, Rate]] = {}

    def rate(self, s: TableStats, strategy: str, h: int) -> Rate:
        key = (id(s), strategy, h)
        got = self._rates.get(key)
        if got is None or got[0] is not s:   # (the stats are kept alive with their rates)
            got = self._rates[key] = (s, self._rate(s, strategy, h if RESIDENT[strategy]
                                                    else 0))
        return got[1]

    def _rate(self, s: TableStats, strategy: str, h: int) -> Rate:
        m, rb = self.m, s.row_bytes
        x = m.xfer(rb)
        ch = m.chunks(rb)
        t_g = m.latency + x / m.core_bpc
        write = rb / m.core_bpc
        bag = 2 * ch * m.op_store                   # zero the accumulator, store the row
        fixed = m.setup + m.latency + m.latency     # index staging + the last output write
        first_ids, first_extra = 0, 0.0
        ob = m.out_block_rows(rb)
        # a block write holds the port; reads queue behind it, then the emptied DMA window
        # refills at once, recovering about one latency of the stall
        block_stall = max(0.0, ob * write - t_g)
        if strategy in ("gm", "l1"):
            hit = s.hit(h) if strategy == "l1" else 0.0
            per_id = _row_period(m, rb, round(hit * 128) / 128)
            fill = (t_g + ch * m.op_add) / 2
            bag += (1 - hit) * block_stall / ob     # a block write stalls the row reads
            gm_id = (1 - hit) * x
        else:
            uh, um = s.uniq(h)
            if strategy == "gm_ub":
                uh, um = 0.0, uh + um
            c = m.stage_rows(rb)
            k_hot, k_miss, k_ids = s.chunk_profile(h)
            if strategy == "gm_ub":
                k_hot, k_miss = 0 * k_hot, k_hot + k_miss
            k_bags = k_ids / max(s.mean_bag, 1e-9)
            stages = _stages(m, rb, k_ids, k_hot, k_miss, k_bags, block_stall / ob, write)
            per_id, single, fill = _chunk_period(m, rb, k_ids, stages, c * um >= 0.5,
                                                 k_bags * bag)
            first_ids, first_extra = c, single - per_id
            bag = 0.0
            gm_id = um * x
        pre, pre_gm = self._preload(s, h) if RESIDENT[strategy] else (0.0, 0.0)
        return Rate(fixed + fill, per_id, bag, first_ids, first_extra, gm_id + 4.0, rb + 4.0,
                    gm_id / m.core_bpc, write, write, m.out_block_rows(rb),
                    h * rb if RESIDENT[strategy] else 0, pre, pre_gm, m.latency, fill)

    def _preload(self, s: TableStats, h: int) -> tuple[float, float]:
        m = self.m
        if h == 0:
            return 0.0, 0.0
        if h >= s.rows:
            total = h * s.row_bytes
            n = -(-total // PRELOAD_DESCRIPTOR_BYTES)
            return m.latency + total / m.core_bpc + n * m.issue, float(total)
        x = m.xfer(s.row_bytes)
        step = max(m.issue, (m.latency + x / m.core_bpc) / m.outstanding, x / m.core_bpc)
        return h * step + m.latency, float(h * x)


@functools.lru_cache(maxsize=4096)
def _row_period(m: Machine, rb: int, hit: float) -> float:
    """Cycles per lookup of the double-buffered row-at-a-time loop at hit fraction ``hit``."""
    x = m.xfer(rb)
    add = m.chunks(rb) * m.op_add
    hits = np.random.default_rng(12345).random(1024) < hit
    scalar = port = l1 = vec = 0.0
    free0 = free1 = 0.0
    mark = 0.0
    for j, is_hit in enumerate(hits.tolist()):
        t = max(scalar + m.index, free0)
        if is_hit:
            s = max(t, l1)
            l1 = s + rb / m.l1_bpc
            done = l1 + m.l1_latency
        else:
            s = max(t, port)
            port = s + x / m.core_bpc
            done = port + m.latency
        scalar = t + m.issue
        vec = max(vec, done) + add
        free0, free1 = free1, vec
        if j == 255:
            mark = vec
    return (vec - mark) / (len(hits) - 256)


def _stages(m: Machine, rb: int, k_ids: np.ndarray, k_hot: np.ndarray, k_miss: np.ndarray,
            k_bags: np.ndarray, stall_per_bag: float, write_per_bag: float) -> np.ndarray:
    """Staging time of each chunk (``k_ids`` lookups, ``k_bags`` bags ending in it): the
    scalar unit (an index read per lookup, a descriptor
    per distinct row), the DMA window (``outstanding`` per latency, or the port), the L1 port
    — whichever is longest. Output block writes hold the port: they stall latency-bound
    reads (``write_stall``) and share the port with bandwidth-bound ones (``write_port``).
    Both weigh by the chunk's GM share (an L1-only chunk does not wait for the port)."""
    x = m.xfer(rb)
    t_g = m.latency + x / m.core_bpc
    tot = k_hot + k_miss
    share = np.divide(k_miss, tot, out=np.zeros_like(tot, dtype=float), where=tot > 0)
    scalar_t = k_ids * m.index + tot * m.issue
    dma_t = np.maximum(k_miss * t_g / m.outstanding + share * k_bags * stall_per_bag,
                       k_miss * x / m.core_bpc + share * k_bags * write_per_bag)
    l1_t = k_hot * rb / m.l1_bpc
    return np.maximum(np.maximum(scalar_t, dma_t), l1_t)


def _chunk_period(m: Machine, rb: int, k_ids: np.ndarray, stages: np.ndarray,
                  from_gm: bool, bag_cycles: np.ndarray) -> tuple[float, float, float]:
    """(steady cycles per lookup, cycles per lookup of a lone chunk without its last fetch's
    latency, that latency) of the double-buffered staged loop, run over the table's own
    sequence of chunks (``k_ids`` lookups each, staging times ``stages``, ``bag_cycles`` of
    bag work). The loop is a max-plus recurrence: the mean of the stages would underestimate
    it. Chunks weigh by their lookups: the batch's last, partial chunk dedups less, and
    normalising it to a full chunk would count its few lookups as many."""
    x = m.xfer(rb)
    last = m.latency + x / m.core_bpc if from_gm else m.l1_latency + rb / m.l1_bpc
    per_row = m.chunks(rb) * (m.op_load + m.op_add)
    if not len(stages) or not k_ids.sum():
        return per_row, per_row, last
    work = k_ids * per_row + bag_cycles
    reps = -(-32 // len(stages))
    seq = np.tile(stages, reps).tolist()
    seq_work = np.tile(work, reps).tolist()
    seq_ids = np.tile(k_ids, reps)
    scalar = 0.0
    vec = [0.0, 0.0]
    for stage, w in zip(seq, seq_work, strict=True):
        start = max(scalar, vec[-2])
        scalar = start + stage
        vec.append(max(vec[-1], scalar + last) + w)
    n0 = len(seq) // 4
    period = (vec[-1] - vec[n0 + 2]) / float(seq_ids[n0 + 1:].sum())
    return period, float((stages.sum() + work.sum()) / k_ids.sum()), last
