"""``summary.png``: clusters per model (red: failed) and, when timed, the speed-up of the
rewritten model over XLA:CPU. Large fleets get histograms instead of one bar per model."""

from __future__ import annotations

import io
from typing import Any

from ember_xla.util.atomic import write_atomic

MAX_BARS = 120


def _bars(ax: Any, rows: list[dict[str, Any]], field: str, label: str) -> None:
    names = [r["model"] for r in rows]
    vals = [(r[field] or 0) if r["status"] == "ok" else 0 for r in rows]
    colors = ["#3a7" if r["status"] == "ok" else "#c33" for r in rows]
    y = range(len(rows))
    ax.barh(list(y), vals, color=colors)
    ax.set_yticks(list(y), [n[-40:] for n in names], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel(label)
    for i, r in enumerate(rows):
        if r["status"] != "ok":
            ax.text(0, i, " failed", va="center", fontsize=6, color="#c33")


def write_chart(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.figure import Figure

    timed = [r for r in rows if r["speedup"]]
    panels = 2 if timed else 1
    ok = sum(r["status"] == "ok" for r in rows)
    title = f"ember-xla batch: {len(rows)} models, {ok} ok, {len(rows) - ok} failed"
    if len(rows) <= MAX_BARS:
        fig: Figure = plt.figure(figsize=(5 * panels + 2, 1.5 + 0.14 * len(rows)))
        ax = fig.add_subplot(1, panels, 1)
        _bars(ax, rows, "clusters", "embedding clusters rewritten")
        if timed:
            ax2 = fig.add_subplot(1, panels, 2)
            _bars(ax2, rows, "speedup", "speed-up vs XLA:CPU (x)")
            ax2.axvline(1.0, color="k", lw=0.8)
    else:
        fig = plt.figure(figsize=(5 * panels + 1, 4))
        ax = fig.add_subplot(1, panels, 1)
        ax.hist([r["clusters"] or 0 for r in rows if r["status"] == "ok"], bins=20, color="#3a7")
        ax.set_xlabel("embedding clusters per model")
        ax.set_ylabel("models")
        if timed:
            ax2 = fig.add_subplot(1, panels, 2)
            ax2.hist([r["speedup"] for r in timed], bins=20, color="#37a")
            ax2.set_xlabel("speed-up vs XLA:CPU (x)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
