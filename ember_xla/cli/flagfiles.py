"""``--flagfile`` files checked before absl reads them: absl opens them with a plain ``open``
(a FIFO blocks it forever) and decodes them in the locale's text mode (a non-UTF-8 file was a
traceback). Every flagfile named on the command line and, recursively, inside flagfiles (as
absl follows them) must be a readable regular UTF-8 text file."""

from __future__ import annotations

import os

from ember_xla.cli.errors import UsageError
from ember_xla.util.input_files import SpecialFileError, open_regular

MAX_DEPTH = 32
MAX_BYTES = 16 << 20


def _named(args: list[str]) -> list[str]:
    """The flagfile names in ``args`` (``--flagfile=F``, ``--flagfile F``, one dash too)."""
    out = []
    for i, a in enumerate(args):
        for prefix in ("--flagfile=", "-flagfile="):
            if a.startswith(prefix):
                out.append(os.path.expanduser(a[len(prefix):].strip()))
        if a in ("--flagfile", "-flagfile") and i + 1 < len(args):
            out.append(os.path.expanduser(args[i + 1].strip()))
    return [f for f in out if f]


def _lines(path: str) -> list[str]:
    try:
        with open_regular(path) as f:
            data = f.read(MAX_BYTES + 1)
    except SpecialFileError as e:
        raise UsageError(f"--flagfile {e}") from None
    except OSError as e:
        raise UsageError(f"--flagfile {path}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"--flagfile {path}: larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"--flagfile {path}: not UTF-8 text ({e.reason} at byte {e.start})"
                         ) from None
    return [ln.strip() for ln in text.splitlines()]


def check_flagfiles(args: list[str], stack: tuple[str, ...] = ()) -> None:
    """Raise ``UsageError`` (one line naming the file) for a flagfile absl could not read."""
    if len(stack) > MAX_DEPTH:
        raise UsageError(f"--flagfile {stack[-1]}: flagfiles nested more than {MAX_DEPTH} deep")
    for path in _named(args):
        if path in stack:
            continue  # absl warns about the cycle and skips it
        check_flagfiles(_lines(path), (*stack, path))
