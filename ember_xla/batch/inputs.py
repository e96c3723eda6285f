"""Expand ``--inputs`` globs into model inputs with stable keys and content hashes.

A match is a model: a file (``.pb``, ``.hlo``, ``.txt``, anything else is tried as a proto and
reported if it is not one) or a directory (a SavedModel). The key, used for the output folder
and the summary's ``model`` column, is the path relative to the glob's fixed leading folders,
with ``/`` spelled ``__``; it does not depend on the other globs, so adding inputs to a job
keeps the keys (and the finished work) of the old ones.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
from typing import Any

from ember_xla.util.input_files import (
    SpecialFileError,
    open_regular,
    refuse_special,
    refuse_special_tree,
)

_CHUNK = 1 << 20


class InputError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class ModelInput:
    key: str
    path: str

    @property
    def is_dir(self) -> bool:
        return os.path.isdir(self.path)


def _fixed_prefix(pattern: str) -> str:
    parts = pattern.split(os.sep)
    fixed = []
    for p in parts[:-1]:
        if glob.has_magic(p):
            break
        fixed.append(p)
    if len(fixed) == len(parts) - 1 and not glob.has_magic(parts[-1]):
        fixed = parts[:-1]           # a plain path: key is its base name
    return os.sep.join(fixed)


def _key(path: str, prefix: str) -> str:
    rel = os.path.relpath(path, prefix or ".").strip(os.sep).replace(os.sep, "__")
    return rel.replace("..", "up") or "model"


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def discover(globs: list[str], out: str | None = None) -> list[ModelInput]:
    """Every model the globs match, sorted by key, except what lies in the job's own output
    folder ``out`` (a rerun with ``--out`` under an input glob must not take its outputs for
    models). A glob that matches nothing is an error (a typo must not silently shrink the
    job); so are two inputs with the same key."""
    if not globs:
        raise InputError("--inputs: no globs given (e.g. --inputs='models/*.pb,models/*/')")
    found: dict[str, ModelInput] = {}
    seen_paths: set[str] = set()
    own = os.path.realpath(out) if out else None
    for pattern in globs:
        pattern = os.path.expanduser(pattern.strip())
        if not pattern:
            continue
        matches = sorted(glob.glob(pattern.rstrip(os.sep) or pattern, recursive=True))
        if not matches:
            raise InputError(f"--inputs: {pattern!r} matches no file or directory")
        prefix = _fixed_prefix(pattern.rstrip(os.sep))
        for m in matches:
            real = os.path.realpath(m)
            if real in seen_paths or (own is not None and _inside(real, own)):
                continue
            try:
                refuse_special_tree(m) if os.path.isdir(m) else refuse_special(m)
            except SpecialFileError as e:
                raise InputError(f"--inputs: {e}") from None
            seen_paths.add(real)
            key = _key(m, prefix)
            if key in found:
                raise InputError(f"--inputs: {m} and {found[key].path} get the same model key "
                                 f"{key!r}; use globs with distinct leading folders")
            found[key] = ModelInput(key, m)
    return [found[k] for k in sorted(found)]


def _hash_file(path: str, h: Any) -> None:
    with open_regular(path) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)


def content_hash(path: str) -> str:
    """sha256 of a file's bytes, or of a directory's files (relative names and contents)."""
    h = hashlib.sha256()
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                h.update(os.path.relpath(full, path).encode() + b"\0")
                _hash_file(full, h)
                h.update(b"\0")
    else:
        _hash_file(path, h)
    return h.hexdigest()
