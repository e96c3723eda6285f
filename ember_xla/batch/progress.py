"""Progress of a batch job: a one-line bar with counts and ETA on a terminal, plain log lines
otherwise (``--progress=auto|bar|log|none``)."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, total: int, mode: str = "auto", stream: TextIO | None = None,
                 width: int = 28):
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "log"
        self.mode, self.total, self.width = mode, total, width
        self.ok = self.failed = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._drawn = False

    @property
    def done(self) -> int:
        return self.ok + self.failed

    def eta(self) -> str:
        if not self.done:
            return "?"
        left = (time.monotonic() - self.t0) / self.done * (self.total - self.done)
        return _clock(left)

    def update(self, key: str, status: str, seconds: float, error: str = "") -> None:
        with self._lock:
            if status == "ok":
                self.ok += 1
            else:
                self.failed += 1
            if self.mode == "log":
                tail = f": {error}" if error else ""
                print(f"batch: [{self.done}/{self.total}] {key} {status} ({seconds:.1f} s, "
                      f"ETA {self.eta()}){tail}", file=self.stream, flush=True)
            elif self.mode == "bar":
                self._draw()

    def _draw(self) -> None:
        frac = self.done / self.total if self.total else 1.0
        fill = int(frac * self.width)
        bar = "#" * fill + "." * (self.width - fill)
        text = (f"\rbatch [{bar}] {self.done}/{self.total}  ok {self.ok}  failed {self.failed}"
                f"  elapsed {_clock(time.monotonic() - self.t0)}  ETA {self.eta()} ")
        self.stream.write(text)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        with self._lock:
            if self.mode == "bar" and self._drawn:
                self.stream.write("\n")
                self.stream.flush()

    def start(self) -> None:
        with self._lock:
            if self.mode == "bar":
                self._draw()
