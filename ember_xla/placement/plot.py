"""A PNG of per-core load: one panel per plan (e.g. symmetric, greedy, ours), a bar per core
split by strategy (the core's emulated cycles shared out in proportion to the predicted cost of
its pieces of each strategy), the predicted total marked. Written atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ember_xla.machines.npu import STRATEGIES
from ember_xla.placement.api import PlacementReport

COLORS = {"gm": "#c44e52", "l1": "#dd8452", "gm_ub": "#4c72b0", "l1_ub": "#55a868"}


def plot_loads(reports: Sequence[PlacementReport], path: str | Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(4.2 * len(reports), 3.6),
                             squeeze=False)
    top = max(max(c.emulated_cycles for c in r.cores) for r in reports) * 1.08
    for ax, r in zip(axes[0], reports, strict=True):
        for c in r.cores:
            counts = {s: sum(p["predicted_cycles"] for p in c.pieces if p["strategy"] == s)
                      for s in STRATEGIES}
            total = sum(counts.values()) or 1.0
            bottom = 0.0
            for s in STRATEGIES:
                h = c.emulated_cycles * counts[s] / total
                if h:
                    ax.bar(c.core, h, bottom=bottom, color=COLORS[s], width=0.8,
                           label=s if c.core == 0 or s not in ax.get_legend_handles_labels()[1]
                           else None)
                    bottom += h
            ax.plot([c.core - 0.4, c.core + 0.4], [c.predicted_cycles] * 2, "k-", lw=1)
        ax.set_title(f"{r.policy}: {r.makespan_cycles:,.0f} cycles", fontsize=9)
        ax.set_xlabel("core")
        ax.set_ylim(0, top)
        ax.set_yscale("linear")
    axes[0][0].set_ylabel("emulated cycles (line: predicted)")
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="upper right", fontsize=8, title="strategy")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path)


def save_png(fig, path: str | Path) -> None:  # noqa: ANN001 (a matplotlib Figure)
    """Write ``fig`` to ``path`` atomically (a temporary file renamed) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
