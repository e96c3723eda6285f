"""The data an NPU emulation works on: embedding tables (dense, or lazily generated rows so
that MLPerf-sized tables need no memory) and one batch of bags per table (flat ``ids`` and
``offsets``, the layout of FBGEMM TBE and Meta's public traces)."""

from __future__ import annotations

import dataclasses

import numpy as np

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed pseudo-random function of each element."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


@dataclasses.dataclass
class Table:
    """One embedding table of float32 rows. ``weights`` given: a dense table; else the value of
    element (r, c) is a fixed function of (seed, r, c), materialised only for rows read."""

    name: str
    rows: int
    dim: int
    weights: np.ndarray | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.dim <= 0:
            raise ValueError(f"table {self.name}: rows and dim must be positive, got "
                             f"{self.rows} x {self.dim}")
        if self.weights is not None:
            w = np.asarray(self.weights)
            if w.shape != (self.rows, self.dim) or w.dtype != np.float32:
                raise ValueError(f"table {self.name}: weights must be float32 of shape "
                                 f"({self.rows}, {self.dim}), got {w.dtype} {w.shape}")
            self.weights = w

    @property
    def row_bytes(self) -> int:
        return self.dim * 4

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The rows ``ids`` (float32, shape ``(len(ids), dim)``)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.weights is not None:
            return self.weights[ids]
        key = (ids.astype(np.uint64)[:, None] * np.uint64(self.dim)
               + np.arange(self.dim, dtype=np.uint64)[None, :]
               + np.uint64(self.seed * 0x9E3779B97F4A7C15 % (1 << 64)))
        bits = _mix(key) >> np.uint64(40)                     # 24 random bits
        return (bits.astype(np.float32) / np.float32(1 << 23) - np.float32(1.0))

    def dense(self) -> np.ndarray:
        return self.rows_of(np.arange(self.rows))


@dataclasses.dataclass
class Bags:
    """The bags of one table in one batch: bag ``b`` looks up ``ids[offsets[b]:offsets[b+1]]``."""

    ids: np.ndarray
    offsets: np.ndarray

    @property
    def n_bags(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def check(self, table: Table) -> None:
        """Refuse malformed bags with one line naming the table and what was expected."""
        o, i = self.offsets, self.ids
        if o.ndim != 1 or len(o) < 1 or o[0] != 0 or o[-1] != len(i) or np.any(np.diff(o) < 0):
            raise ValueError(f"table {table.name}: offsets must start at 0, not decrease and "
                             f"end at len(ids) = {len(i)}")
        if len(i) and (i.min() < 0 or i.max() >= table.rows):
            bad = int(i[(i < 0) | (i >= table.rows)][0])
            raise ValueError(f"table {table.name}: index {bad} out of range [0, {table.rows})")


def bags(ids: np.ndarray, offsets: np.ndarray) -> Bags:
    return Bags(np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64))
