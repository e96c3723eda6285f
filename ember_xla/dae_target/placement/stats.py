"""Index statistics of one table's batch, what the cost model sees: lookups and bags, the rows
ranked by access count (the hot set is a prefix of that ranking), the hit fraction of every
hot-set size, and — for the staged strategies, which fetch each distinct row of a chunk once —
the distinct resident and non-resident rows per lookup within chunks of the staging size.
Skew enters through these numbers, not only through table sizes."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.emulator.npu.machine import Machine
from ember_xla.emulator.npu.workload import Bags, Table


def hot_ladder(rows: int, l1_rows: int) -> list[int]:
    """Hot-set sizes the mapper considers: 0, powers of two up to what L1 holds, the table."""
    sizes = {0}
    h = 16
    while h < min(rows, l1_rows):
        sizes.add(h)
        h *= 2
    sizes.add(min(rows, l1_rows))
    return sorted(sizes)


@dataclasses.dataclass
class TableStats:
    name: str
    rows: int
    row_bytes: int
    n_ids: int
    n_bags: int
    cum_ids: np.ndarray          # cum_ids[b] = lookups of bags [0, b)
    ranking: np.ndarray          # rows by descending access count (accessed rows only)
    ladder: list[int]            # hot-set sizes the mapper tries
    held_ranks: np.ndarray       # sorted hotness ranks of the counted lookups (see table_stats)
    pair_rank: np.ndarray        # hotness rank of each distinct (staging chunk, row) pair
    pair_chunk: np.ndarray       # the staging chunk of each such pair
    unique_fraction: float       # distinct rows / lookups over the whole batch
    n_profile: int               # lookups the ranking, hit and chunk statistics come from
    chunk: int                   # lookups per staging chunk
    in_sample: bool = False      # hot sets ranked on the measured batch itself (no profile)

    def hot_rows(self, h: int) -> np.ndarray:
        """The ``h`` hottest rows in hotness order; the whole table when ``h >= rows``."""
        if h >= self.rows:
            return np.arange(self.rows, dtype=np.int64)
        top = self.ranking[:h]
        if len(top) < h:    # fewer rows were accessed: add never-read rows (harmless)
            rest = np.setdiff1d(np.arange(min(self.rows, 2 * h + len(top))), top)[:h - len(top)]
            top = np.concatenate([top, rest])
        return top.astype(np.int64)

    def hit(self, h: int) -> float:
        """Fraction of lookups that hit a hot set of ``h`` rows."""
        if h >= self.rows:
            return 1.0
        return float(np.searchsorted(self.held_ranks, h) / self.n_profile) \
            if self.n_profile else 0.0

    def uniq(self, h: int) -> tuple[float, float]:
        """Distinct (hot, other) rows per lookup within staging chunks, hot set of ``h``."""
        if not self.n_profile:
            return 0.0, 0.0
        n_hot = int(np.count_nonzero(self.pair_rank < h)) if h < self.rows \
            else len(self.pair_rank)
        return n_hot / self.n_profile, (len(self.pair_rank) - n_hot) / self.n_profile

    def chunk_profile(self, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct (hot, other) rows and lookups of each staging chunk, hot set of ``h``
        (staging time is a maximum of terms, so the cost model prices it per chunk)."""
        k = int(self.pair_chunk[-1]) + 1 if len(self.pair_chunk) else 0
        hot = (self.pair_rank < h) if h < self.rows else np.ones(len(self.pair_rank), bool)
        n_hot = np.bincount(self.pair_chunk, weights=hot, minlength=k)
        n_all = np.bincount(self.pair_chunk, minlength=k)
        ids = np.full(k, self.chunk, dtype=np.int64)
        if k:
            ids[-1] = self.n_profile - (k - 1) * self.chunk
        return n_hot, n_all - n_hot, ids

    def ids_of(self, b0: int, b1: int) -> int:
        return int(self.cum_ids[b1] - self.cum_ids[b0])

    @property
    def mean_bag(self) -> float:
        return self.n_ids / self.n_bags if self.n_bags else 0.0


def _ranking(ids: np.ndarray) -> np.ndarray:
    """Distinct ids by descending count, ties by id (deterministic)."""
    uniq, counts = np.unique(ids, return_counts=True)
    return uniq[np.lexsort((uniq, -counts))]


def table_stats(table: Table, bags: Bags, m: Machine, profile: Bags | None = None
                ) -> TableStats:
    """Statistics of ``bags``; the plan's hot sets are ranked on all of ``profile`` (another
    batch of the same distribution; default: ``bags`` itself). The hot-set statistics describe
    the batch those hot sets will run on:

    - a separate profile: out of sample, as a deployment sees it — rows ranked on the first
      half of the profile's lookups, hits / distinct rows per chunk counted on the second
      half, so a hot set is not credited with rows that were hot only by chance;
    - no profile (``bags`` is its own profile): in sample — ranked and counted on ``bags``,
      because the hot sets are the top rows of ``bags`` and the emulator runs ``bags``. An
      out-of-sample estimate would predict hits that batch does not have (a 2048-row hot set
      of a near-uniform 2726-lookup batch catches 75% of its lookups, not 0%). Such a plan is
      flattered: its hot sets know the batch (``in_sample``; reports say so)."""
    in_sample = profile is None or profile is bags
    ids = (bags if in_sample else profile).ids
    ranking = _ranking(ids)
    half = len(ids) // 2
    first, held = (ids[:half], ids[half:]) if half and not in_sample else (ids, ids)
    rank_first = _ranking(first)
    big = np.int64(table.rows + 1)                  # rank of a row the first half never saw
    pos = np.searchsorted(rank_first_sorted := np.sort(rank_first), held)
    found = (pos < len(rank_first_sorted)) & (rank_first_sorted[np.minimum(
        pos, max(len(rank_first_sorted) - 1, 0))] == held) if len(rank_first) else \
        np.zeros(len(held), bool)
    rank_of_sorted = np.argsort(rank_first)         # rank of the i-th smallest id
    held_rank = np.where(found, rank_of_sorted[np.minimum(pos, max(len(rank_first) - 1, 0))]
                         if len(rank_first) else 0, big)
    n = len(held)
    c = m.stage_rows(table.row_bytes)
    if n:
        key = (np.arange(n) // c) * np.int64(table.rows) + held
        _, first_at = np.unique(key, return_index=True)      # distinct (chunk, row)
        pair_rank, pair_chunk = held_rank[first_at], first_at // c
        order = np.argsort(pair_chunk, kind="stable")
        pair_rank, pair_chunk = pair_rank[order], pair_chunk[order]
    else:
        pair_rank = pair_chunk = np.zeros(0, dtype=np.int64)
    return TableStats(table.name, table.rows, table.row_bytes, len(bags.ids), bags.n_bags,
                      np.concatenate([[0], np.cumsum(bags.lengths())]).astype(np.int64),
                      ranking, hot_ladder(table.rows, m.l1_rows(table.row_bytes)),
                      np.sort(held_rank), pair_rank, pair_chunk,
                      len(np.unique(held)) / n if n else 0.0, n, c, in_sample)
