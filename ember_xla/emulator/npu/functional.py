"""Functional results of an NPU program: each core pools its pieces' bags with numpy in the
order it processes them, every bag summed in index order (float32, left to right) — the
order every strategy keeps, so the outputs do not depend on the placement."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember_xla.emulator.npu.workload import Bags, Table


def bag_sums(table: Table, bags: Bags, b0: int, b1: int) -> np.ndarray:
    """Sum-pooled bags ``[b0, b1)``: ``out[b] = ((0 + row_0) + row_1) + ...`` in float32."""
    offs = bags.offsets[b0:b1 + 1]
    lens = np.diff(offs)
    out = np.zeros((b1 - b0, table.dim), dtype=np.float32)
    for k in range(int(lens.max()) if len(lens) else 0):
        sel = np.nonzero(lens > k)[0]
        out[sel] += table.rows_of(bags.ids[offs[sel] + k])
    return out


def pooled_outputs(tables: Sequence[Table], batches: Sequence[Bags],
                   programs: Sequence[Sequence]) -> list[np.ndarray]:
    """Outputs per table; every bag must be pooled by exactly one piece."""
    outs = [np.zeros((b.n_bags, t.dim), dtype=np.float32) for t, b in zip(tables, batches,
                                                                          strict=True)]
    seen = [np.zeros(b.n_bags, dtype=np.int32) for b in batches]
    for works in programs:
        for w in works:
            if not 0 <= w.bag_start <= w.bag_stop <= batches[w.table].n_bags:
                raise ValueError(f"table {tables[w.table].name}: bags [{w.bag_start}, "
                                 f"{w.bag_stop}) outside [0, {batches[w.table].n_bags})")
            outs[w.table][w.bag_start:w.bag_stop] = bag_sums(
                tables[w.table], batches[w.table], w.bag_start, w.bag_stop)
            seen[w.table][w.bag_start:w.bag_stop] += 1
    for t, s in zip(tables, seen, strict=True):
        if np.any(s != 1):
            b = int(np.nonzero(s != 1)[0][0])
            raise ValueError(f"table {t.name}: bag {b} is pooled {int(s[b])} times (expected "
                             "exactly once)")
    return outs
