"""Predictions read off a grid of measured points instead of a fitted formula: the kernel's
speedup over XLA:CPU and XLA's time, interpolated multilinearly in the logarithms of the
grid's sizes and clamped to the grid.

A point holds its sizes and, per backend (``xla``, ``ember``), the median seconds of its
alternating samples (``<backend>_s``) and a second, less favourable statistic of them (the
minimum or the lower quartile, ``<backend><robust>``). A cell's speedup is the less favourable
of two: the median over the cell's points of their ratios XLA/ember of medians, and that of
the second statistic (a point disturbed by the shared machine moves one, seldom both). Cells
are the points' values of ``cell_keys``; a cell may hold several points (e.g. every measured D
of one table size), or one. XLA's time is interpolated over ``time_keys`` from its medians;
the kernel's is XLA's over the speedup. Every combination of the keys' values must have been
measured (a full grid)."""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

Point = dict[str, Any]


def _bracket(axis: list[float], x: float) -> tuple[int, int, float]:
    """Indices of the grid values around ``x`` (clamped) and the weight of the upper one."""
    if x <= axis[0]:
        return 0, 0, 0.0
    if x >= axis[-1]:
        return len(axis) - 1, len(axis) - 1, 0.0
    hi = bisect.bisect_right(axis, x)
    lo = hi - 1
    return lo, hi, (x - axis[lo]) / (axis[hi] - axis[lo])


def _interp(axes: list[list[float]], value: Callable[[tuple[float, ...]], float],
            at: list[float]) -> float:
    """Multilinear interpolation over the grid ``axes`` (log values) of ``value(corner)``."""
    brackets = [_bracket(a, x) for a, x in zip(axes, at, strict=True)]
    total = 0.0
    for mask in range(1 << len(axes)):
        w, corner = 1.0, []
        for k, (lo, hi, t) in enumerate(brackets):
            up = (mask >> k) & 1
            w *= t if up else 1.0 - t
            corner.append(axes[k][hi if up else lo])
        if w:
            total += w * value(tuple(corner))
    return total


def _log_axis(points: list[Point], key: str) -> list[float]:
    return sorted({math.log(p[key]) for p in points})


def _at(p: Point, keys: Sequence[str]) -> tuple[float, ...]:
    return tuple(math.log(p[k]) for k in keys)


def predict(points: list[Point], cell_keys: Sequence[str], time_keys: Sequence[str],
            at: dict[str, float], robust: str = "_min_s") -> dict[str, float]:
    """Predicted seconds {"ember": ..., "xla": ...} at the sizes ``at`` (a value for every key
    of ``time_keys``, which include ``cell_keys``) from ``points``."""
    if not points:
        raise ValueError("no measured points")
    cells: dict[tuple[float, ...], list[Point]] = {}
    for p in points:
        cells.setdefault(_at(p, cell_keys), []).append(p)

    def log_speedup(corner: tuple[float, ...]) -> float:
        cell = cells[corner]
        med = statistics.median(p["xla_s"] / p["ember_s"] for p in cell)
        low = statistics.median(p[f"xla{robust}"] / p[f"ember{robust}"] for p in cell)
        return math.log(min(med, low))

    xla = {_at(p, time_keys): p["xla_s"] for p in points}
    speedup = math.exp(_interp([_log_axis(points, k) for k in cell_keys], log_speedup,
                               [math.log(max(at[k], 1)) for k in cell_keys]))
    t_xla = math.exp(_interp([_log_axis(points, k) for k in time_keys],
                             lambda c: math.log(xla[c]),
                             [math.log(max(at[k], 1)) for k in time_keys]))
    return {"ember": t_xla / speedup, "xla": t_xla}
