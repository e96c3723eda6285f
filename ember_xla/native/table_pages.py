"""Huge pages for large embedding tables: Python side of the kernels' table-page collapse
(``table_pages.cc``). A table of 64 MiB or more that a second call reads at the same address is
collapsed in place onto 2 MiB transparent huge pages (same bytes, same addresses), by default on
a low-priority background thread. Here: the mode switch, a wait for the background work (for
benchmarks and for services that want their first timed call on huge pages) and statistics."""

from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

from ember_xla.native import load_library

MODES = {0: "off", 1: "background", 2: "on the calling thread"}


@dataclass(frozen=True)
class TablePageStats:
    """What the collapse did in this process so far."""

    tables: int  # tables collapsed or queued (read by a second call at the same address)
    bytes_collapsed: int
    chunks_failed: int  # 32 MiB chunks Linux refused (no THP, no free huge pages, old kernel)
    last_errno: int  # errno of the last refusal, 0 when none
    seconds: float  # time spent collapsing (on the background thread in mode 1)

    def describe(self) -> str:
        text = (f"{self.tables} table(s), {self.bytes_collapsed / 2**30:.2f} GiB collapsed to "
                f"2 MiB pages in {self.seconds:.1f} s")
        if self.chunks_failed:
            name = errno.errorcode.get(self.last_errno, str(self.last_errno))
            text += f"; {self.chunks_failed} chunk(s) refused by Linux ({name})"
        return text


def _lib() -> ctypes.CDLL:
    lib = load_library()
    lib.EmberSetTablePages.restype = ctypes.c_int
    lib.EmberSetTablePages.argtypes = [ctypes.c_int]
    lib.EmberTablePagesWait.restype = ctypes.c_int
    lib.EmberTablePagesWait.argtypes = [ctypes.c_double]
    lib.EmberTablePagesStats.restype = None
    lib.EmberTablePagesStats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    lib.EmberTablePagesForget.restype = None
    lib.EmberTablePagesForget.argtypes = []
    lib.EmberTablePagesMode.restype = ctypes.c_int
    lib.EmberTablePagesMode.argtypes = []
    return lib


def set_mode(mode: int) -> int:
    """Switch the mode (0 off, 1 background, 2 on the calling thread); returns the previous one.
    The initial mode comes from ``$EMBER_XLA_TABLE_PAGES`` (default 1)."""
    if mode not in MODES:
        raise ValueError(f"table page mode must be one of {sorted(MODES)}, got {mode!r}")
    return int(_lib().EmberSetTablePages(mode))


def wait(timeout: float = 600.0) -> bool:
    """Wait until no table is queued or being collapsed; False when `timeout` seconds passed."""
    return bool(_lib().EmberTablePagesWait(float(timeout)))


def forget() -> None:
    """Forget the addresses of the tables seen so far. The collapse keys a table by its address,
    so a new table allocated where a freed one was collapsed would be taken as already on huge
    pages; call this after freeing tables and before reading new ones (e.g. between two models
    in one process)."""
    _lib().EmberTablePagesForget()


def stats() -> TablePageStats:
    out = (ctypes.c_int64 * 5)()
    _lib().EmberTablePagesStats(out)
    return TablePageStats(int(out[0]), int(out[1]), int(out[2]), int(out[3]), out[4] / 1e6)


def describe_mode() -> str:
    """The kernels' current mode by name (read from the library, which parsed
    ``$EMBER_XLA_TABLE_PAGES``), with that variable's value when it is set."""
    name = MODES[int(_lib().EmberTablePagesMode())]
    raw = os.environ.get("EMBER_XLA_TABLE_PAGES")
    return name + (" (default)" if raw is None else f" (EMBER_XLA_TABLE_PAGES={raw})")
