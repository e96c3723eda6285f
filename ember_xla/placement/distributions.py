"""Index distributions for placement benchmarks and tests: the MLPerf DLRM-DCNv2
table shapes (26 tables, D = 128, rows capped) with their multi-hot pooling factors, indices
drawn uniformly or Zipf(alpha) over a random permutation of each table's rows; an "extremely
unbalanced" case (three tables take most of the traffic, concentrated on a few hot rows); and
a Meta-trace-sized synthetic model (856 tables) for mapper scaling. Tables are lazy
(``Table.rows_of``), so uncapped row counts cost no memory."""

from __future__ import annotations

import numpy as np

from ember_xla.emulator.npu.workload import Bags, Table, bags

# MLPerf DLRM-DCNv2 (Criteo 1TB): rows per table and multi-hot pooling factors
DLRM_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956,
             405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152,
             12973, 108, 36)
DLRM_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3,
                1, 1)
DISTRIBUTIONS = ("uniform", "zipf0.8", "zipf1.05", "zipf1.2", "unbalanced")
REALISTIC = ("zipf1.05", "zipf1.2")


class ZipfRows:
    """Rank k drawn with p ~ 1/k^alpha (alpha 0: uniform), ranks mapped to rows by a random
    permutation fixed at construction, so several batches share one distribution."""

    def __init__(self, rng: np.random.Generator, rows: int, alpha: float) -> None:
        self.rows, self.alpha = rows, alpha
        if alpha:
            self.cdf = np.cumsum(np.arange(1, rows + 1, dtype=np.float64) ** -alpha)
            self.perm = rng.permutation(rows)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if not self.alpha:
            return rng.integers(0, self.rows, n, dtype=np.int64)
        ranks = np.searchsorted(self.cdf, rng.random(n) * self.cdf[-1], side="right")
        return self.perm[np.minimum(ranks, self.rows - 1)].astype(np.int64)


def zipf_ids(rng: np.random.Generator, rows: int, n: int, alpha: float) -> np.ndarray:
    """``n`` ids of a table of ``rows`` from a fresh Zipf(alpha) distribution."""
    return ZipfRows(rng, rows, alpha).sample(rng, n)


def dlrm_batches(distribution: str, batch: int = 256, n_batches: int = 2,
                 cap: int = 1_000_000, dim: int = 128, seed: int = 0
                 ) -> tuple[list[Table], list[list[Bags]]]:
    """The 26 DLRM-DCNv2 tables (rows capped at ``cap``) and ``n_batches`` independent batches
    of ``batch`` samples from one distribution (the first can profile, the others run)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r}: expected one of "
                         f"{', '.join(DISTRIBUTIONS)}")
    rng = np.random.default_rng(seed)
    tables: list[Table] = []
    out: list[list[Bags]] = [[] for _ in range(n_batches)]
    heavy = {20, 21, 9}        # "unbalanced": these take most of the traffic
    for i, (rows, pool) in enumerate(zip(DLRM_ROWS, DLRM_POOLING, strict=True)):
        rows = min(rows, cap)
        tables.append(Table(f"t{i}", rows, dim, seed=seed * 1000 + i))
        if distribution == "unbalanced":
            pool = 200 if i in heavy else 1
            hot = rng.choice(rows, min(32, rows), replace=False)
        else:
            dist = ZipfRows(rng, rows, 0.0 if distribution == "uniform"
                            else float(distribution[4:]))
        for j in range(n_batches):
            n = batch * pool
            if distribution != "unbalanced":
                ids = dist.sample(rng, n)
            elif i in heavy:   # 97% of lookups on 32 hot rows, the rest uniform
                ids = np.where(rng.random(n) < 0.97, hot[rng.integers(0, len(hot), n)],
                               rng.integers(0, rows, n))
            else:
                ids = rng.integers(0, rows, n, dtype=np.int64)
            out[j].append(bags(ids, np.arange(batch + 1) * pool))
    return tables, out


def dlrm_model(distribution: str, batch: int = 256, cap: int = 1_000_000, dim: int = 128,
               seed: int = 0) -> tuple[list[Table], list[Bags]]:
    """The 26 DLRM-DCNv2 tables and one batch (see ``dlrm_batches``)."""
    tables, bs = dlrm_batches(distribution, batch, 1, cap, dim, seed)
    return tables, bs[0]


def meta_like(n_tables: int = 856, batch: int = 64, dim: int = 64, seed: int = 0
              ) -> tuple[list[Table], list[Bags]]:
    """A synthetic model of the size of Meta's public traces: rows log-uniform in [10, 1M],
    variable bag lengths (mean pooling 1..30), Zipf alpha drawn from {0, 0.8, 1.05, 1.2}."""
    rng = np.random.default_rng(seed)
    tables, batches = [], []
    for i in range(n_tables):
        rows = int(10 ** rng.uniform(1, 6))
        mean = float(rng.uniform(1, 30))
        lens = rng.poisson(mean, batch)
        alpha = float(rng.choice([0.0, 0.8, 1.05, 1.2]))
        tables.append(Table(f"t{i}", rows, dim, seed=seed * 100000 + i))
        ids = zipf_ids(rng, rows, int(lens.sum()), alpha)
        batches.append(bags(ids, np.concatenate([[0], np.cumsum(lens)])))
    return tables, batches
