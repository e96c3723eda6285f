"""Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing) from the timing
model's recordings (``recorder.EventRecorder``), one process per emulated cluster:

- ``access unit: layer L`` threads: one ``load`` slice per load while its addresses are
  generated and issued, plus an async ``layer L loads in flight`` slice from issue to data;
- counters: ``data queue`` (bytes reserved, capacity = lanes x data_queue_bytes),
  ``control queue`` (tokens), ``outstanding requests`` (cache-line requests in flight);
- ``execute unit`` thread: one slice per callback (``case N``), and a ``starved`` slice
  wherever the core waited for a token or data (queue empty).

Timestamps are microseconds at the target's clock (``ts = cycles / clock_ghz / 1000``); each
event's ``args`` carry the exact cycles. Clusters follow each other in time (one run of the
model). ``max_events`` caps the file: only events that end before the cut are kept and
``otherData.truncated_at_cycle`` says where the cut is."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.emulator.recorder import EventRecorder
from ember_xla.emulator.target import Target
from ember_xla.util import strict_json

EXEC_TID, LAYER_TID0 = 1, 10


@dataclasses.dataclass
class TracedRun:
    """One cluster's recording: a label, its target and the recorder timing.simulate filled."""

    label: str
    target: Target
    recorder: EventRecorder
    cycles: float


def _counter(intervals: list[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Samples (t, value) of the sum of ``(start, end, amount)`` intervals; at equal times
    ends count before starts (a slot freed at t can be refilled at t)."""
    deltas = sorted([(s, 1, a) for s, _, a in intervals] + [(e, 0, -a) for _, e, a in intervals])
    out: list[tuple[float, float]] = []
    v = 0.0
    for t, _, d in deltas:
        v += d
        if out and out[-1][0] == t:
            out[-1] = (t, v)
        else:
            out.append((t, v))
    return out


def capacities(target: Target) -> dict[str, int]:
    """The most each counter track may show on ``target``."""
    a = target.access
    return {"data queue": a.data_queue_bytes * a.lanes,
            "control queue": a.control_queue_entries,
            "outstanding requests": a.outstanding_requests}


def _events(pid: int, run: TracedRun, offset: float) -> list[tuple[float, float, dict]]:
    """(cycle, end cycle, event) of one run, before conversion to microseconds."""
    rec = run.recorder
    ev: list[tuple[float, float, dict]] = []
    for n, (layer, issue, agen_end, done, addr, nbytes) in enumerate(rec.loads):
        tid = LAYER_TID0 + layer
        ev.append((issue, agen_end, {"ph": "X", "name": "load", "tid": tid, "args": {
            "address": addr, "bytes": nbytes, "issue_cycle": issue, "data_cycle": done}}))
        name = f"layer {layer} loads in flight"
        ident = f"{pid}.{n}"
        ev.append((issue, done, {"ph": "b", "name": name, "cat": "load", "id": ident,
                                  "tid": tid, "args": {"bytes": nbytes}}))
        ev.append((done, done, {"ph": "e", "name": name, "cat": "load", "id": ident,
                                "tid": tid, "_pair": issue}))
    prev_end = 0.0
    for case, ready, start, end in rec.callbacks:
        if start > prev_end:
            ev.append((prev_end, start, {"ph": "X", "name": "starved (queue empty)",
                                         "tid": EXEC_TID, "args": {"cycles": start - prev_end}}))
        ev.append((start, end, {"ph": "X", "name": f"case {case}", "tid": EXEC_TID, "args": {
            "case": case, "ready_cycle": ready, "start_cycle": start, "cycles": end - start}}))
        prev_end = end
    counters = {
        "data queue": ("bytes", [(t0, t1, b) for t0, t1, b in rec.entries.values()]),
        "control queue": ("tokens", [(t0, t1, 1.0) for t0, t1 in rec.tokens]),
        "outstanding requests": ("requests", [(t0, t1, 1.0) for t0, t1 in rec.requests]),
    }
    for name, (unit, intervals) in counters.items():
        for t, v in _counter(intervals):
            ev.append((t, t, {"ph": "C", "name": name, "args": {unit: v}}))
    for e in ev:
        e[2]["pid"] = pid
    return [(t0 + offset, t1 + offset, e) for t0, t1, e in ev]


def _metadata(pid: int, run: TracedRun) -> list[dict]:
    def meta(name: str, tid: int | None, value: str) -> dict:
        d = {"ph": "M", "name": name, "pid": pid, "args": {"name": value}}
        if tid is not None:
            d["tid"] = tid
        return d

    out = [meta("process_name", None, f"{run.label} on {run.target.name}"),
           meta("thread_name", EXEC_TID, "execute unit")]
    for layer in sorted({ld[0] for ld in run.recorder.loads}):
        out.append(meta("thread_name", LAYER_TID0 + layer, f"access unit: layer {layer}"))
    return out


def chrome_trace(runs: list[TracedRun], max_events: int = 500_000) -> dict[str, Any]:
    """The trace-event JSON object of ``runs`` (in that order, one after the other)."""
    events: list[tuple[float, float, dict]] = []
    offset = 0.0
    clock = {r.target.clock_ghz for r in runs}
    if len(clock) > 1:
        raise ValueError("a trace of several targets needs one clock")
    ghz = clock.pop() if clock else 1.0
    for pid, run in enumerate(runs, 1):
        events += _events(pid, run, offset)
        offset += run.cycles
    events.sort(key=lambda e: (e[0], e[2]["ph"] != "e"))
    cut = None
    if len(events) > max_events:
        cut = events[max_events][0]
        events = [e for e in events if e[1] < cut and e[2].get("_pair", e[0]) < cut]
    out: list[dict] = [m for pid, run in enumerate(runs, 1) for m in _metadata(pid, run)]
    for t0, t1, e in events:
        e.pop("_pair", None)
        e["ts"] = t0 / (ghz * 1e3)
        if e["ph"] == "X":
            e["dur"] = (t1 - t0) / (ghz * 1e3)
        out.append(e)
    other: dict[str, Any] = {"clock_ghz": ghz, "total_cycles": offset,
                             "clusters": [r.label for r in runs],
                             "capacity": {str(pid): capacities(r.target)
                                          for pid, r in enumerate(runs, 1)}}
    if cut is not None:
        other["truncated_at_cycle"] = cut
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": other}


def write_trace(path: str, runs: list[TracedRun], max_events: int = 500_000) -> int:
    """Write the trace atomically; returns the number of events written."""
    from ember_xla.util.atomic import write_atomic

    data = chrome_trace(runs, max_events)
    write_atomic(path, strict_json.dumps(data, separators=(",", ":")))
    return len(data["traceEvents"])
