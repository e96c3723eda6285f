"""The memory system of a target: set-associative LRU caches (inclusive fill) in front of a
DRAM channel with a load-to-use latency and a bandwidth shared by every request. Requests must
arrive in non-decreasing time order (the timing model issues them so)."""

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


class Memory:
    def __init__(self, target: Target) -> None:
        if len({c.line_bytes for c in target.caches}) != 1:
            raise ValueError(f"{target.source}: all cache levels must share one line size")
        self.line_bytes = target.caches[0].line_bytes
        self.levels = [CacheLevel(c) for c in target.caches]
        self.dram_latency = target.dram_latency_cycles
        self.transfer = self.line_bytes / target.dram_bytes_per_cycle
        self.dram_free = 0.0
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
        start = max(t, self.dram_free)
        self.dram_free = start + self.transfer
        self.dram_lines += 1
        self.dram_busy += self.transfer
        return start + self.transfer + self.dram_latency

    @property
    def dram_bytes(self) -> int:
        return self.dram_lines * self.line_bytes

    def stats(self) -> list[LevelStats]:
        return [lv.stats for lv in self.levels]
