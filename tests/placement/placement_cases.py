"""Random small workloads for the placement tests (loaded by conftest.py)."""

import numpy as np

from ember_xla.emulator.npu.workload import Table, bags


def random_workload(rng: np.random.Generator, n_tables: int, dense: bool = True):
    tables, batches = [], []
    for i in range(n_tables):
        rows = int(rng.integers(1, 3000))
        dim = int(rng.choice([8, 32, 128]))
        n_bags = int(rng.integers(1, 40))
        lens = rng.integers(0, 10, n_bags)
        ids = (rng.zipf(float(rng.uniform(1.1, 2.0)), int(lens.sum())) - 1) % rows
        w = rng.standard_normal((rows, dim)).astype(np.float32) if dense else None
        tables.append(Table(f"t{i}", rows, dim, w, seed=i))
        batches.append(bags(ids, np.concatenate([[0], np.cumsum(lens)])))
    return tables, batches
