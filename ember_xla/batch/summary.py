"""The job's summary from its manifest entries: ``summary.csv`` (one row per model),
``summary.json`` (rows, totals, settings), ``summary.txt`` (a short text table) and
``summary.png`` (chart.py). Run-dependent numbers (wall time per model, the run's id) are kept
apart in ``summary.json["run"]``, so the same job gives the same rows on every runner."""

from __future__ import annotations

import csv
import io
import os
from typing import Any

from ember_xla.batch.settings import JobSettings
from ember_xla.util import strict_json
from ember_xla.util.atomic import write_atomic

COLUMNS = ("model", "status", "clusters", "near_misses", "verify", "max_abs_diff", "speedup",
           "xla_ms", "ember_ms", "emulated_cycles", "signatures", "instructions", "error",
           "input")


def row_of(entry: dict[str, Any]) -> dict[str, Any]:
    r = {c: None for c in COLUMNS}
    r.update({k: strict_json.number(v) for k, v in entry.get("row", {}).items() if k in COLUMNS})
    r.update(model=entry["key"], status=entry["status"], error=entry.get("error") or None,
             input=entry["input"])
    notices = entry.get("row", {}).get("notices")
    if notices:  # import notices (an unknown dimension given a size): summary.json and text
        r["notices"] = [str(n) for n in notices]
    return r


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_cell(r[c]) for c in COLUMNS])
    return buf.getvalue()


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == "ok"]
    speed = [r["speedup"] for r in ok if r["speedup"]]
    return {"models": len(rows), "ok": len(ok), "failed": len(rows) - len(ok),
            "clusters": sum(r["clusters"] or 0 for r in ok),
            "near_misses": sum(r["near_misses"] or 0 for r in ok),
            "models_with_clusters": sum(1 for r in ok if r["clusters"]),
            "verified_bitwise": sum(1 for r in ok if r["verify"] == "bitwise"),
            "median_speedup": sorted(speed)[len(speed) // 2] if speed else None}


def _after_input(text: Any, path: Any) -> str:
    """An error or notice without the model's own path in front (the line names the model)."""
    text = str(text)
    if path:
        for p in sorted({str(path), os.path.abspath(str(path))}, key=len, reverse=True):
            if text.startswith(p) and text[len(p):][:1] in (":", "["):
                return text[len(p):].lstrip(":").lstrip()
    return text


def text_table(rows: list[dict[str, Any]], tot: dict[str, Any], limit: int = 40) -> str:
    head = ("model", "status", "clusters", "near-miss", "verify", "speedup", "cycles")
    body = []
    for r in rows:
        body.append((r["model"], r["status"], _cell(r["clusters"]), _cell(r["near_misses"]),
                     r["verify"] or "-", f"{r['speedup']:.2f}x" if r["speedup"] else "-",
                     _cell(r["emulated_cycles"]) or "-"))
    bad = [b for b in body if b[1] != "ok"]
    room = max(0, limit - len(bad))
    shown = body if len(body) <= limit else sorted(
        bad + [b for b in body if b[1] == "ok"][:room], key=lambda b: b[0])
    widths = [max(len(h), *(len(str(b[i])) for b in shown)) if shown else len(h)
              for i, h in enumerate(head)]
    widths[0] = min(widths[0], 48)
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    for b in shown:
        cells = [str(b[0])[-widths[0]:], *map(str, b[1:])]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    if len(shown) < len(body):
        lines.append(f"(the {len(body) - len(shown)} ok models are in summary.csv)")
    for r in [r for r in rows if r["status"] != "ok"][:limit]:
        lines.append(f"failed: {r['model']}: {_after_input(r['error'], r['input'])}")
    noted = [(r["model"], _after_input(n, r["input"])) for r in rows
             for n in r.get("notices", [])]
    for model, n in noted[:limit]:
        lines.append(f"note: {model}: {n}")
    if len(noted) > limit:
        lines.append(f"(and {len(noted) - limit} more notes in summary.json)")
    med = f", median speed-up {tot['median_speedup']:.2f}x" if tot["median_speedup"] else ""
    lines.append(f"{tot['models']} models: {tot['ok']} ok, {tot['failed']} failed; "
                 f"{tot['clusters']} clusters in {tot['models_with_clusters']} models, "
                 f"{tot['near_misses']} near-misses{med}")
    return "\n".join(lines)


def write_summary(settings: JobSettings, entries: list[dict[str, Any]], run_id: str,
                  run: dict[str, Any]) -> dict[str, Any]:
    from ember_xla.batch.chart import write_chart

    rows = [row_of(e) for e in sorted(entries, key=lambda e: e["key"])]
    tot = totals(rows)
    text = text_table(rows, tot)
    out = settings.out
    doc = {"models": rows, "totals": tot, "settings": settings.output_settings(),
           "run": {"id": run_id, "runner": settings.runner, "workers": settings.workers, **run,
                   "seconds": {e["key"]: e.get("seconds") for e in entries}}}
    write_atomic(os.path.join(out, "summary.csv"), to_csv(rows))
    write_atomic(os.path.join(out, "summary.json"), strict_json.dumps(doc, indent=1) + "\n")
    write_atomic(os.path.join(out, "summary.txt"), text + "\n")
    png = os.path.join(out, "summary.png")
    write_chart(rows, png)
    text += f"\nsummary: {os.path.join(out, 'summary.csv')} (.json, .txt, .png)"
    return {"text": text, "totals": tot, "rows": rows}
