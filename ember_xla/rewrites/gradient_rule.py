"""The measured rule for a table gradient: unfused (``ember.scatter_grad`` whose update stays in
XLA), its speed against XLA:CPU's scatter read off the measured grid of ``cost_model.json``'s
``scatter_grad/sum`` family; fused with its update (``ember.sparse_sgd`` ...), against XLA's
scatter and dense update, off the ``sparse_update/<optimizer>`` families. Not a fitted formula
(the linear model's median relative residual on the unfused grid is 0.7-0.9: the time of a
[V, D] result jumps where it leaves the caches and where its fresh pages fault, which no term
of ``c0 + a*L*D + b*V*D + c*L`` follows).

Per form (plain: the rows given; gathered: the kernel reads the pooled gradient rows itself),
for a fused update also per donation of the table (donated: updated in place; kept: a new
table written), and per grid cell (table rows V, lookups L), the speedup is the less
favourable of two statistics of the measured ratio XLA/ember over the cell's dimensions D:
the median of the per-point ratios of median times and that of minimum times (a point
disturbed by the shared machine moves one, seldom both). Between cells the log speedup is
interpolated bilinearly in (log V, log L), clamped to the grid; XLA's time is interpolated the
same way in (log V, log L, log D) from its median times, and the kernel's is XLA's over the
speedup."""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable
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


def form_of(input_roles: list[str]) -> str:
    return "gathered" if "source_rows" in input_roles else "plain"


def predict(points: list[Point], form: str, rows: int, lookups: int, dim: int,
            donated: bool | None = None) -> dict[str, float]:
    """Predicted seconds {"ember": ..., "xla": ...} of a gradient of ``form`` with ``lookups``
    ids into a [rows, dim] table, from ``points`` of that form (and, unless None, donation)."""
    pts = [p for p in points if p["form"] == form
           and (donated is None or bool(p.get("donated")) == donated)]
    if not pts:
        raise ValueError(f"no measured {form} points"
                         + ("" if donated is None else f" with donated={donated}"))
    cells: dict[tuple[float, float], list[Point]] = {}
    for p in pts:
        cells.setdefault((math.log(p["V"]), math.log(p["L"])), []).append(p)

    def log_speedup(corner: tuple[float, ...]) -> float:
        cell = cells[corner]
        med = statistics.median(p["xla_s"] / p["ember_s"] for p in cell)
        low = statistics.median(p["xla_min_s"] / p["ember_min_s"] for p in cell)
        return math.log(min(med, low))

    xla = {(math.log(p["V"]), math.log(p["L"]), math.log(p["D"])): p["xla_s"] for p in pts}
    vl = [_log_axis(pts, "V"), _log_axis(pts, "L")]
    at = [math.log(rows), math.log(max(lookups, 1))]
    speedup = math.exp(_interp(vl, log_speedup, at))
    t_xla = math.exp(_interp([*vl, _log_axis(pts, "D")], lambda c: math.log(xla[c]),
                             [*at, math.log(dim)]))
    return {"ember": t_xla / speedup, "xla": t_xla}
