"""The output folders whose job lock this process holds: ``job.locked`` records each held
lock's descriptor here, and a new worker inherits it (``tasks.new_worker``), so the lock dies
with the last process holding it and no rerun starts while a worker of a killed job still
writes."""

from __future__ import annotations

import os

_HELD: dict[str, int] = {}  # output folder (absolute) -> the descriptor of its held lock


def hold(out: str, fd: int) -> None:
    _HELD[os.path.abspath(out)] = fd


def release(out: str) -> None:
    _HELD.pop(os.path.abspath(out), None)


def held(out: str) -> int | None:
    """The descriptor of ``out``'s lock if this process holds it."""
    return _HELD.get(os.path.abspath(out))
