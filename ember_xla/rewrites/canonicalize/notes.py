"""What canonicalization saw but did not rewrite: (pass, op, reason) records collected while a
pipeline runs, so the rewrite report lists them as near-misses (no silent misses)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator

from ember_xla.ir.operation import Operation


@dataclasses.dataclass
class CanonNote:
    pass_name: str
    op: Operation
    reason: str


_NOTES: contextvars.ContextVar[list[CanonNote] | None] = contextvars.ContextVar(
    "ember_canon_notes", default=None)


def note(pass_name: str, op: Operation, reason: str) -> None:
    """Record a refusal (dropped when no collection is active, e.g. a pass run on its own)."""
    sink = _NOTES.get()
    if sink is not None and not any(n.op is op and n.reason == reason for n in sink):
        sink.append(CanonNote(pass_name, op, reason))


@contextlib.contextmanager
def collecting() -> Iterator[list[CanonNote]]:
    sink: list[CanonNote] = []
    token = _NOTES.set(sink)
    try:
        yield sink
    finally:
        _NOTES.reset(token)
