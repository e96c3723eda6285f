"""The one error type of the importers and the HLO text parser: it names the file, the place
and what was expected."""

from __future__ import annotations


class HloImportError(ValueError):
    """Bad or unsupported input. ``str(err)`` is a one-line message with the location."""

    def __init__(self, message: str, path: str | None = None, line: int = 0, col: int = 0):
        self.path = path
        self.line = line
        self.col = col
        self.bare = message
        where = path or "<input>"
        if line:
            where += f":{line}:{col}"
        super().__init__(f"{where}: {message}")
