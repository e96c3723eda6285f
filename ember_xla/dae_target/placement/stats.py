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
    cum_counts: np.ndarray       # cum_counts[h] = lookups of the h hottest rows
    pair_rank: np.ndarray        # hotness rank of each distinct (staging chunk, row) pair
    pair_chunk: np.ndarray       # the staging chunk of each such pair
    unique_fraction: float       # distinct rows / lookups over the whole batch

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
        return float(self.cum_counts[min(h, len(self.ranking))] / self.n_ids) if self.n_ids \
            else 0.0

    def uniq(self, h: int) -> tuple[float, float]:
        """Distinct (hot, other) rows per lookup within staging chunks, hot set of ``h``."""
        if not self.n_ids:
            return 0.0, 0.0
        n_hot = int(np.count_nonzero(self.pair_rank < h)) if h < self.rows \
            else len(self.pair_rank)
        return n_hot / self.n_ids, (len(self.pair_rank) - n_hot) / self.n_ids

    def chunk_profile(self, h: int) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (hot, other) rows of each staging chunk, hot set of ``h`` (staging time
        is a maximum of terms, so the cost model averages it per chunk, not per lookup)."""
        k = int(self.pair_chunk[-1]) + 1 if len(self.pair_chunk) else 0
        hot = (self.pair_rank < h) if h < self.rows else np.ones(len(self.pair_rank), bool)
        n_hot = np.bincount(self.pair_chunk, weights=hot, minlength=k)
        n_all = np.bincount(self.pair_chunk, minlength=k)
        return n_hot, n_all - n_hot

    def ids_of(self, b0: int, b1: int) -> int:
        return int(self.cum_ids[b1] - self.cum_ids[b0])

    @property
    def mean_bag(self) -> float:
        return self.n_ids / self.n_bags if self.n_bags else 0.0


def table_stats(table: Table, bags: Bags, m: Machine) -> TableStats:
    ids = bags.ids
    n = len(ids)
    uniq, counts = np.unique(ids, return_counts=True)
    order = np.lexsort((uniq, -counts))             # by count, ties by row id: deterministic
    ranking = uniq[order]
    c = m.stage_rows(table.row_bytes)
    rank_of = np.zeros(len(uniq), dtype=np.int64)
    rank_of[order] = np.arange(len(uniq))
    if n:
        pos = np.searchsorted(uniq, ids)
        pairs = np.unique((np.arange(n) // c) * len(uniq) + pos)   # distinct (chunk, row)
        pair_rank = rank_of[pairs % len(uniq)]
        pair_chunk = pairs // len(uniq)
    else:
        pair_rank = pair_chunk = np.zeros(0, dtype=np.int64)
    return TableStats(table.name, table.rows, table.row_bytes, n, bags.n_bags,
                      np.concatenate([[0], np.cumsum(bags.lengths())]).astype(np.int64),
                      ranking, hot_ladder(table.rows, m.l1_rows(table.row_bytes)),
                      np.concatenate([[0], np.cumsum(counts[order])]), pair_rank, pair_chunk,
                      len(uniq) / n if n else 0.0)
