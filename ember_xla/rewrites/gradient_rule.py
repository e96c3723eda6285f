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
speedup (measured_grid.py)."""

from __future__ import annotations

from ember_xla.rewrites import measured_grid
from ember_xla.rewrites.measured_grid import Point


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
    return measured_grid.predict(pts, ("V", "L"), ("V", "L", "D"),
                                 {"V": rows, "L": lookups, "D": dim})
