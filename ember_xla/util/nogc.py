"""Pause Python's cyclic garbage collector while building large object graphs.

Importing a 100k-instruction module allocates hundreds of thousands of long-lived objects; the
collector would rescan them over and over (quadratic-looking time). Nothing we build is garbage.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
