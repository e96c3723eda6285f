"""The memory system of a target: set-associative LRU caches (inclusive fill) in front of a
DRAM channel with a load-to-use latency and a bandwidth shared by every request, or, when the
target gives a bank model, channels of banks with one open row each (``dram_timing``; the
algorithm of ``cc/cache.h``: Dram). Requests must arrive in non-decreasing time order (the
timing model issues them so)."""

from __future__ import annotations

import dataclasses

from ember_xla.machines.config import Cache, Target


@dataclasses.dataclass
class LevelStats:
    name: str
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class CacheLevel:
    def __init__(self, spec: Cache) -> None:
        self.spec = spec
        self.sets = spec.size_bytes // (spec.line_bytes * spec.associativity)
        self.ways = spec.associativity
        self.lines: list[dict[int, None]] = [{} for _ in range(self.sets)]  # ordered: LRU first
        self.stats = LevelStats(spec.name)

    def lookup(self, line: int) -> bool:
        """True on a hit (and the line becomes most recent); a miss does not fill."""
        s = self.lines[line % self.sets]
        if line in s:
            del s[line]
            s[line] = None
            self.stats.hits += 1
            return True
        self.stats.misses += 1
        return False

    def fill(self, line: int) -> None:
        s = self.lines[line % self.sets]
        if len(s) >= self.ways:
            del s[next(iter(s))]
        s[line] = None


@dataclasses.dataclass(frozen=True)
class DramTiming:
    """DRAM parameters in cycles, derived once from the target (both timing cores use these
    doubles): per-channel transfer cycles of a line; banks == 0: no bank model."""

    latency: float
    transfer: float
    channels: int = 1
    banks: int = 0
    row_lines: int = 1
    row_hit: float = 0.0
    row_miss: float = 0.0


def dram_timing(target: Target) -> DramTiming:
    line_bytes = target.caches[0].line_bytes
    b = target.dram.banks
    if b is None:
        return DramTiming(target.dram_latency_cycles, line_bytes / target.dram_bytes_per_cycle)
    return DramTiming(target.dram_latency_cycles,
                      line_bytes / (target.dram_bytes_per_cycle / b.channels), b.channels,
                      b.banks_per_channel, b.row_bytes // line_bytes,
                      b.row_hit_ns * target.clock_ghz, b.row_miss_ns * target.clock_ghz)


class Dram:
    """Channels of banks (``cc/cache.h``: Dram, decision for decision)."""

    def __init__(self, d: DramTiming) -> None:
        self.d = d
        self.chan_free = [0.0] * d.channels
        self.bank_free = [0.0] * max(d.channels * d.banks, 1)
        self.open_row: list[int | None] = [None] * max(d.channels * d.banks, 1)

    def access(self, line: int, t: float) -> float:
        d = self.d
        if d.banks <= 0:
            start = max(t, self.chan_free[0])
            self.chan_free[0] = start + d.transfer
            return start + d.transfer + d.latency
        rest = line // d.row_lines
        ch = rest % d.channels
        rest //= d.channels
        bank = ch * d.banks + rest % d.banks
        row = rest // d.banks
        cmd = max(t, self.bank_free[bank])
        hit = self.open_row[bank] == row
        self.open_row[bank] = row
        self.bank_free[bank] = cmd + (0.0 if hit else d.row_miss - d.row_hit) + d.transfer
        bus = max(cmd + (d.row_hit if hit else d.row_miss), self.chan_free[ch])
        self.chan_free[ch] = bus + d.transfer
        return bus + d.transfer + d.latency


class Memory:
    def __init__(self, target: Target) -> None:
        if len({c.line_bytes for c in target.caches}) != 1:
            raise ValueError(f"{target.source}: all cache levels must share one line size")
        self.line_bytes = target.caches[0].line_bytes
        self.levels = [CacheLevel(c) for c in target.caches]
        timing = dram_timing(target)
        self.dram = Dram(timing)
        self.transfer = timing.transfer / timing.channels   # busy per line, per channel
        self.dram_lines = 0
        self.dram_busy = 0.0

    def access(self, line: int, t: float) -> float:
        """Load one line at cycle ``t``; returns the cycle its data is available."""
        for i, level in enumerate(self.levels):
            if level.lookup(line):
                for upper in self.levels[:i]:
                    upper.fill(line)
                return t + level.spec.latency_cycles
        for level in self.levels:
            level.fill(line)
        self.dram_lines += 1
        self.dram_busy += self.transfer
        return self.dram.access(line, t)

    @property
    def dram_bytes(self) -> int:
        return self.dram_lines * self.line_bytes

    def stats(self) -> list[LevelStats]:
        return [lv.stats for lv in self.levels]
