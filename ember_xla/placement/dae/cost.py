"""The analytic cost model of a piece on a DAE core: a share of a cluster's batch run with one
program variant. Numbers come from the target (``Target``: address generation, outstanding
requests, cache sizes and latencies, DRAM latency, row and transfer times, dispatch and op
cycles), from the program (``Profile``: per lookup and per output row, the cache lines it loads
and the cycles of the callbacks it fires, counted on the cluster's whole run, not timed) and
from the piece's index statistics (its lookups' row frequencies):

- execute: ``exec_per_id x lookups + exec_per_row x rows``;
- access unit: every line costs ``1 / (lanes x addresses_per_cycle)`` cycles of address
  generation;
- memory latency: ``outstanding_requests`` lines in flight, each taking the latency of the
  level that holds it (the other streams' lines from DRAM on their first touch, else L1); a
  table row hits a level when it is among the most frequent rows the piece's part of that
  level holds (a private level shared by the core's pieces, a shared level by every cluster,
  in proportion to their distinct rows), after its first touch;
- DRAM: the piece's DRAM lines x a line's transfer over the machine's channels;
a piece takes the largest of the four, plus one DRAM latency to fill the pipeline. A core runs
its pieces one after the other; in a plan the DRAM requests queue (M/D/1 at the channels'
utilisation) and the cores share the channels' bandwidth (max-min fair, ``fluid``), so the
makespan is at least the whole machine's DRAM transfer time (``predict``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ember_xla.emulator.memory import dram_timing
from ember_xla.machines.config import Target


@dataclasses.dataclass(frozen=True)
class Profile:
    """Counts of one cluster's program variant on its whole batch, per lookup / output row."""

    table_lines_per_id: float
    other_lines_per_id: float
    exec_per_id: float
    exec_per_row: float
    row_lines: float               # table lines of one row
    other_dram_lines_per_id: float = 0.0   # distinct lines of the other streams (first touch)


@dataclasses.dataclass(frozen=True)
class PieceLoad:
    """What the cost model knows of a piece before the plan is priced."""

    profile: Profile
    n_ids: int
    n_rows: int
    counts: np.ndarray             # lookups per distinct row, decreasing
    cluster: int = 0               # which cluster it is a share of
    cluster_counts: np.ndarray | None = None   # the whole cluster's (None: this piece's)

    @property
    def whole(self) -> np.ndarray:
        return self.counts if self.cluster_counts is None else self.cluster_counts


def row_counts(ids: np.ndarray) -> np.ndarray:
    _, c = np.unique(np.asarray(ids).reshape(-1), return_counts=True)
    return np.sort(c)[::-1]


def _hits(counts: np.ndarray, capacity_rows: float) -> int:
    """Lookups that hit a cache holding the ``capacity_rows`` most frequent rows (each row
    misses on its first touch)."""
    k = int(max(0.0, min(capacity_rows, len(counts))))
    return int(counts[:k].sum()) - k


@dataclasses.dataclass(frozen=True)
class PieceCost:
    cycles: float
    dram_lines: float
    bound: str
    terms: dict[str, float] = dataclasses.field(default_factory=dict)  # cycles of each bound


def piece_cost(t: Target, p: PieceLoad, level_share: Sequence[float],
               dram_wait: float = 0.0) -> PieceCost:
    """Cycles of one piece on a core; ``level_share[i]``: the fraction of cache level i this
    piece's rows may use (a private level: of the piece's own rows; a shared level: of its
    cluster's, whose shares on other cores fill the same lines); ``dram_wait``: the queueing
    delay of a DRAM request under the machine's load (``predict``)."""
    prof = p.profile
    d = dram_timing(t)
    line_bytes = t.caches[0].line_bytes
    rl = max(prof.row_lines, 1e-9)
    lines = prof.table_lines_per_id * p.n_ids
    whole = p.whole
    scale = p.n_ids / max(int(whole.sum()), 1)
    hits_above = 0.0
    lat_sum = 0.0
    for c, share in zip(t.caches, level_share, strict=True):
        cap_rows = c.size_bytes * share / (rl * line_bytes)
        h = _hits(whole, cap_rows) * scale if c.shared else float(_hits(p.counts, cap_rows))
        h = max(h, hits_above)
        lat_sum += (h - hits_above) * prof.row_lines * c.latency_cycles
        hits_above = h
    miss_ids = p.n_ids - hits_above
    dram_lines = miss_ids * prof.row_lines
    row_time = d.row_miss if d.banks else 0.0
    lat_sum += dram_lines * (d.latency + d.transfer + row_time + dram_wait)
    other = prof.other_lines_per_id * p.n_ids
    cold = prof.other_dram_lines_per_id * p.n_ids          # index streams: each line once
    lat_sum += (other - cold) * t.caches[0].latency_cycles
    lat_sum += cold * (d.latency + d.transfer + row_time + dram_wait)
    dram_lines += cold
    a = t.access
    terms = {
        "execute": prof.exec_per_id * p.n_ids + prof.exec_per_row * p.n_rows,
        "access": (lines + other) / (a.lanes * a.addresses_per_cycle),
        "memory latency": lat_sum / a.outstanding_requests,
        "dram bandwidth": dram_lines * d.transfer / d.channels,
    }
    bound = max(terms, key=lambda k: terms[k])
    fill = d.latency + d.transfer + row_time if p.n_ids else 0.0
    return PieceCost(terms[bound] + fill, dram_lines, bound, terms)


def fluid(busy: Sequence[float], dram: Sequence[float]) -> list[float]:
    """Finish cycle of each core when the cores share the DRAM channels: core k alone takes
    ``busy[k]`` cycles of which ``dram[k]`` keep the channels busy, so it asks a fraction
    ``dram[k] / busy[k]`` of their bandwidth; the running cores get max-min fair shares
    (who asks less than an equal share gets it all) and a core given less than it asks runs
    slower in proportion."""
    n = len(busy)
    left = [1.0 if b > 0 else 0.0 for b in busy]
    done = [0.0] * n
    now = 0.0
    while True:
        run = [k for k in range(n) if left[k] > 1e-12]
        if not run:
            return done
        speed = {}
        cap, m = 1.0, len(run)
        for k in sorted(run, key=lambda j: dram[j] / busy[j]):
            ask = dram[k] / busy[k]
            give = min(ask, cap / m)
            speed[k] = 1.0 if ask <= 0 else min(1.0, give / ask)
            cap, m = cap - give, m - 1
        step = min(left[k] * busy[k] / speed[k] for k in run)
        now += step
        for k in run:
            left[k] -= step * speed[k] / busy[k]
            if left[k] <= 1e-9:
                left[k], done[k] = 0.0, now


def level_shares(t: Target, cores: int, pieces: Sequence[tuple[int, PieceLoad]]
                 ) -> list[list[float]]:
    """Per piece, the fraction of each cache level its rows may use: a private level among
    the core's pieces, a shared level among the clusters, both in proportion to distinct
    rows."""
    own = [float(len(p.counts)) for _, p in pieces]
    per_core = [0.0] * cores
    for (k, _), n in zip(pieces, own, strict=True):
        per_core[k] += n
    clusters = {p.cluster: float(len(p.whole)) for _, p in pieces}
    total = sum(clusters.values()) or 1.0
    return [[clusters[p.cluster] / total if c.shared else n / (per_core[k] or 1.0)
             for c in t.caches] for (k, p), n in zip(pieces, own, strict=True)]


def memory_headroom(t: Target, cores: int, pieces: Sequence[tuple[int, PieceLoad]]) -> float:
    """The largest ratio, over the pieces, of a memory-side term (address generation, memory
    latency, DRAM transfer) to the piece's execute term: below 1, no program variant that
    only changes how rows reach the core (hot rows pinned in the private caches, a deeper
    prefetch) can shorten any piece."""
    worst = 0.0
    for (_, p), sh in zip(pieces, level_shares(t, cores, pieces), strict=True):
        terms = piece_cost(t, p, sh).terms
        ex = terms["execute"]
        mem = max(v for k, v in terms.items() if k != "execute")
        worst = max(worst, mem / ex if ex > 0 else (float("inf") if mem > 0 else 0.0))
    return worst


def predict(t: Target, cores: int, pieces: Sequence[tuple[int, PieceLoad]]
            ) -> tuple[list[float], float, str]:
    """(predicted cycles per core, makespan, what bounds it) of pieces placed as
    ``(core, load)``. Cache shares by distinct rows (a private level among the core's pieces,
    a shared level among the clusters); DRAM requests wait as in an M/D/1 queue at the
    channels' utilisation (at most behind every request the cores can have in flight), and the
    cores share the channels' bandwidth (``fluid``): a fixed point of the makespan and the
    utilisation."""
    d = dram_timing(t)
    shares = level_shares(t, cores, pieces)
    wait = 0.0
    done = [0.0] * cores
    dram = [0.0] * cores
    for _ in range(12):
        busy = [0.0] * cores
        dram = [0.0] * cores
        for (k, p), sh in zip(pieces, shares, strict=True):
            pc = piece_cost(t, p, sh, wait)
            busy[k] += pc.cycles
            dram[k] += pc.dram_lines * d.transfer / d.channels
        done = fluid(busy, dram)
        span = max(done, default=0.0)
        rho = min(sum(dram) / span, 1.0 - 1e-9) if span else 0.0
        # M/D/1 waiting time, at most every request the cores can have in flight ahead
        in_flight = cores * t.access.outstanding_requests
        wait = min(rho * d.transfer / (2 * (1 - rho)), in_flight * d.transfer / d.channels)
    span = max(done, default=0.0)
    saturated = span > 0 and sum(dram) >= 0.9 * span
    return done, span, "dram bandwidth" if saturated else "cores"
