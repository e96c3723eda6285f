"""Where the installer put a compiled library of this package: next to the Python file (a
regular install), in another directory of the package's ``__path__`` (an editable install:
scikit-build-core's redirecting finder lists the site-packages install tree there while the
Python files stay in the source tree), or wherever the ``ember-xla`` distribution's RECORD
says it is."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def candidates(module_file: str, package_path: Iterable[str], name: str,
               distribution: str = "ember-xla") -> list[Path]:
    """Possible locations of library ``name``, most specific first, without duplicates."""
    dirs = [Path(module_file).resolve().parent] + [Path(p) for p in package_path]
    found = [d / name for d in dirs]
    try:
        from importlib import metadata

        for f in metadata.distribution(distribution).files or []:
            if f.name == name:
                found.append(Path(str(f.locate())))
    except Exception:  # noqa: BLE001 - no metadata (plain source checkout): nothing more
        pass
    unique: list[Path] = []
    for p in found:
        if p not in unique:
            unique.append(p)
    return unique


def find(module_file: str, package_path: Iterable[str], name: str) -> Path:
    """The first existing candidate, else the first candidate (for the error message)."""
    cands = candidates(module_file, package_path, name)
    for p in cands:
        if p.is_file():
            return p.resolve()
    return cands[0]
