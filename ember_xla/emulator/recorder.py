"""What the timing model did, event by event: an optional recorder ``timing.simulate`` fills
when one is passed (``simulate(target, trace, recorder=EventRecorder())``); without one the
model runs exactly as before and records nothing. The times are the model's own cycles, so a
recording never changes a result. ``perfetto.py`` turns a recording into a Chrome/Perfetto
trace.

Recorded intervals (all in cycles, ``end >= start``):
- ``loads``: per load, its traversal layer, the cycles its address generation took
  (``issue``..``agen_end``) and when its data arrived (``done``), with address and bytes;
- ``requests``: per cache-line request, issue and completion (at most
  ``outstanding_requests`` overlap: the access unit's in-flight window);
- ``entries``: per data-queue entry, when its room was reserved and when the callback that
  popped it ended (occupancy of the data queue, in bytes);
- ``tokens``: per control token, when it was pushed and when the execute unit popped it;
- ``callbacks``: per callback, its case id, when it could start (``ready``: token and data
  there), when it started and ended (``ready > previous end``: the core starved)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class EventRecorder:
    loads: list[tuple[int, float, float, float, int, int]] = dataclasses.field(
        default_factory=list)                      # (layer, issue, agen_end, done, addr, bytes)
    requests: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    entries: dict[int, list[float]] = dataclasses.field(default_factory=dict)  # e: [t0, t1, B]
    tokens: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    callbacks: list[tuple[int, float, float, float]] = dataclasses.field(
        default_factory=list)                      # (case, ready, start, end)

    def load(self, layer: int, issue: float, agen_end: float, done: float, addr: int,
             nbytes: int) -> None:
        self.loads.append((layer, issue, agen_end, done, addr, nbytes))

    def request(self, issue: float, done: float) -> None:
        self.requests.append((issue, done))

    def reserve(self, entry: int, t: float, nbytes: int) -> None:
        popped = self.entries.get(entry, [0.0, -1.0])[1]
        self.entries[entry] = [t, max(popped, t) if popped >= 0 else -1.0, float(nbytes)]

    def pop(self, entry: int, t: float) -> None:
        """(The model may pop an entry without loads before it reserves its room; its
        interval is then empty.)"""
        row = self.entries.setdefault(entry, [t, -1.0, 0.0])
        row[1] = max(t, row[0])

    def callback(self, case: int, pushed: float, ready: float, start: float, end: float
                 ) -> None:
        self.tokens.append((pushed, start))
        self.callbacks.append((case, ready, start, end))

    @property
    def events(self) -> int:
        return (len(self.loads) + len(self.requests) + len(self.entries) + len(self.tokens)
                + len(self.callbacks))
