"""The per-cluster timing report of an emulated run (``ember-xla emulate``,
``ember_xla.jit(..., mode="emulate")``): per cluster its cycles, the time at the target's
clock, access/execute utilization, queue-full and queue-empty stall cycles, bytes loaded and
moved from DRAM, cache hit rates and the unit that bounds it; as a text table and as JSON with
``total_cycles`` (the emulated cycles of all clusters of one run, which run one after the
other on the target) and one entry per cluster. A cluster that was not emulated (the lowering
refused it; it ran on the native kernel) has an entry with ``emulated: false`` and the reason,
and adds no cycles. Each entry says its ``pass``: ``forward`` (a lookup) or ``backward`` (a
lookup's gradient or a fused optimizer update of a training step).

Stall cycles are the timing model's: queue-full is summed over the loads that waited for room
(layers waiting at the same time each count, so it can exceed the run's cycles), queue-empty
is the execute unit's idle time waiting for a token or data."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.custom_calls import TARGETS
from ember_xla.emulator.timing import TimingReport
from ember_xla.machines.config import Target
from ember_xla.util import strict_json


@dataclasses.dataclass
class ClusterResult:
    index: int
    custom_call: str             # the ember.* instruction's name
    kind: str                    # the custom-call target, e.g. ember.offsets_bag
    timing: TimingReport | None  # None: not emulated
    refused: str | None = None   # why it was not emulated (it ran on the native kernel)
    program: str | None = None   # a one-line summary of the DAE program

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "custom_call": self.custom_call,
                             "kind": self.kind, "pass": pass_of(self.kind),
                             "emulated": self.timing is not None}
        if self.refused is not None:
            d["refused"] = self.refused
        if self.program is not None:
            d["program"] = self.program
        t = self.timing
        if t is not None:
            d.update(cycles=t.cycles, seconds=t.seconds,
                     access_utilization=_ratio(t.access_busy, t.cycles),
                     execute_utilization=_ratio(t.execute_busy, t.cycles),
                     queue_full_stall_cycles=t.queue_full_stall,
                     queue_empty_stall_cycles=t.queue_empty_stall,
                     bytes_loaded=t.bytes_loaded, dram_bytes=t.dram_bytes,
                     cache_hit_rate=dict(t.cache_hit_rate), bound=t.bound,
                     control_tokens=t.tokens, data_entries=t.entries)
        return d


def pass_of(kind: str) -> str:
    """"forward" (a lookup) or "backward" (its gradient, or a fused optimizer update)."""
    t = TARGETS.get(kind)
    return t.direction if t is not None else "forward"


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


@dataclasses.dataclass
class EmulationReport:
    target: Target
    level: str                   # e.g. "O3"
    clusters: list[ClusterResult]
    source: str = ""
    engine: str = ""             # which emulator produced the cycles ("C++" / "Python")
    verify: dict[str, Any] | None = None
    trace_events: int | None = None  # events written to the --trace file

    @property
    def total_cycles(self) -> float:
        return sum(c.timing.cycles for c in self.clusters if c.timing is not None)

    @property
    def total_seconds(self) -> float:
        return self.total_cycles / (self.target.clock_ghz * 1e9)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source, "target": self.target.name,
            "target_file": self.target.source, "clock_ghz": self.target.clock_ghz,
            "level": self.level, "engine": self.engine, "total_cycles": self.total_cycles,
            "total_seconds": self.total_seconds,
            "clusters": [c.as_dict() for c in self.clusters]}
        if self.verify is not None:
            d["verify"] = self.verify
        if self.trace_events is not None:
            d["trace_events"] = self.trace_events
        return d

    def to_json(self) -> str:
        return strict_json.dumps(self.as_dict(), indent=2)

    def table(self) -> str:
        """A fixed-width text table, one row per cluster and a total row."""
        caches = [c.name for c in self.target.caches]
        head = (["#", "cluster", "cycles", "time", "access", "execute", "q-full", "q-empty",
                 "loaded", "DRAM"] + [f"hit {n}" for n in caches] + ["bound"])
        rows = [head]
        notes = []
        for c in self.clusters:
            t = c.timing
            if t is None:
                rows.append([str(c.index), f"%{c.custom_call}", "-", "-", "-", "-", "-", "-",
                             "-", "-"] + ["-"] * len(caches) + ["native"])
                notes.append(f"  cluster {c.index} (%{c.custom_call}) ran on the native "
                             f"kernel, not emulated: {c.refused}")
                continue
            rows.append([str(c.index), f"%{c.custom_call}", f"{t.cycles:,.0f}",
                         _time(t.seconds), _pct(t.access_busy, t.cycles),
                         _pct(t.execute_busy, t.cycles), f"{t.queue_full_stall:,.0f}",
                         f"{t.queue_empty_stall:,.0f}", _bytes(t.bytes_loaded),
                         _bytes(t.dram_bytes)]
                        + [f"{100 * t.cache_hit_rate.get(n, 0.0):.1f}%" for n in caches]
                        + [t.bound])
        rows.append(["", "total", f"{self.total_cycles:,.0f}", _time(self.total_seconds)]
                    + [""] * (len(head) - 4))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"{self.source + ': ' if self.source else ''}{len(self.clusters)} cluster(s) "
                 f"emulated at -{self.level} on {self.target.name} ({self.target.clock_ghz:g} "
                 f"GHz){', ' + self.engine + ' emulator' if self.engine else ''}"]
        for r in rows:
            lines.append("  " + "  ".join(v.rjust(w) if i != 1 else v.ljust(w)
                                          for i, (v, w) in enumerate(zip(r, widths,
                                                                         strict=True))).rstrip())
        return "\n".join(lines + notes)


def _pct(a: float, b: float) -> str:
    return f"{100 * _ratio(a, b):.1f}%"


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
