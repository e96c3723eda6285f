"""The result-buffer cache of the kernel library (buffer_cache.cc), seen from Python.

XLA:CPU maps every large result and temporary buffer anew for each execution and unmaps it
when freed, so a step that writes whole new tables (a training step whose tables are not
donated) pays the kernel's zeroing of every page before its own writes. :func:`install`
redirects the large aligned allocations of XLA:CPU's runtime library to a cache that keeps
freed blocks mapped for the next execution (bounded: a quarter of physical memory by default,
``EMBER_XLA_BUFFER_CACHE_MIB``; ``0`` turns it off; blocks idle for 10 s are released).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

from ember_xla.native import load_library

_lock = threading.Lock()
_installed: dict[str, int] = {}


@dataclass(frozen=True)
class CacheStats:
    """Counters since the process started."""

    reused: int  # allocations served by an idle block
    mapped: int  # allocations that mapped a new block
    released: int  # blocks unmapped (over the limit, idle too long, or caching off)
    in_use: int  # blocks handed out and not freed yet
    idle: int  # freed blocks kept for reuse
    idle_bytes: int


def install(runtime_object: str) -> int:
    """Redirect the allocations of the loaded shared object whose path contains
    ``runtime_object``; idempotent. Returns the number of call sites redirected (0 when the
    object is not loaded or the cache is off)."""
    with _lock:
        if runtime_object not in _installed:
            lib = load_library()
            lib.EmberBufferCacheInstall.restype = ctypes.c_int
            _installed[runtime_object] = lib.EmberBufferCacheInstall(runtime_object.encode())
        return _installed[runtime_object]


def set_limit(limit_bytes: int) -> int:
    """Keep at most ``limit_bytes`` of freed blocks (0: stop caching); returns the previous
    limit. For tests and A/B benchmarks."""
    lib = load_library()
    lib.EmberBufferCacheSetLimit.restype = ctypes.c_uint64
    lib.EmberBufferCacheSetLimit.argtypes = [ctypes.c_uint64]
    return int(lib.EmberBufferCacheSetLimit(limit_bytes))


def release_idle() -> None:
    """Unmap every idle block now (the limit stays): memory measurements that start from the
    resident set, and callers about to need memory outside XLA."""
    set_limit(set_limit(0))


def stats() -> CacheStats:
    out = (ctypes.c_uint64 * 6)()
    load_library().EmberBufferCacheStats(out)
    return CacheStats(*(int(v) for v in out))
