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
        self._first: float | None = None   # when the first model finished
        self._stop = threading.Event()

    @property
    def done(self) -> int:
        return self.ok + self.failed

    def eta(self) -> str:
        """From the pace since the first model finished (worker start-up is not a model's
        time); from the start while only one has."""
        if not self.done:
            return "?"
        now = time.monotonic()
        if self.done >= 2 and self._first is not None and now > self._first:
            rate = (now - self._first) / (self.done - 1)
        else:
            rate = (now - self.t0) / self.done
        return _clock(rate * (self.total - self.done))

    def update(self, key: str, status: str, seconds: float, error: str = "") -> None:
        with self._lock:
            if status == "ok":
                self.ok += 1
            else:
                self.failed += 1
            if self._first is None:
                self._first = time.monotonic()
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
        self._stop.set()
        with self._lock:
            if self.mode == "bar" and self._drawn:
                self.stream.write("\n")
                self.stream.flush()

    def start(self) -> None:
        with self._lock:
            if self.mode == "bar":
                self._draw()
        if self.mode == "bar":  # keep the elapsed time moving while a model runs
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if not self._stop.is_set():
                    self._draw()
