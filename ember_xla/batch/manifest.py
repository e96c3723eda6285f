"""Per-model outputs and the manifest that vouches for them.

Layout of ``--out``: ``models/<key>/`` (one model's outputs), ``manifest/<key>.json`` (its
entry: content hashes of the input and of the settings, status, summary row, sha256 of every
output file), ``.staging/`` (work in progress), ``logs/``. A model's outputs are written to a
staging folder and switched into ``models/<key>`` with renames; its manifest entry is removed
before and written (atomically) after. A model counts as done only if its entry matches the
current input and settings and every file it lists is there with that hash, so a job killed
at any point leaves nothing that a rerun would trust but should not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Any

from ember_xla.util import strict_json
from ember_xla.util.atomic import write_atomic

MODELS, MANIFEST, STAGING, LOGS = "models", "manifest", ".staging", "logs"


def entry_path(out: str, key: str) -> str:
    return os.path.join(out, MANIFEST, key + ".json")


def read_entry(out: str, key: str) -> dict[str, Any] | None:
    try:
        with open(entry_path(out, key)) as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key else None


def write_entry(out: str, entry: dict[str, Any]) -> None:
    write_atomic(entry_path(out, entry["key"]), strict_json.dumps(entry, indent=1, sort_keys=True))


def remove_entry(out: str, key: str) -> None:
    try:
        os.unlink(entry_path(out, key))
    except FileNotFoundError:
        pass


def hash_tree(folder: str) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder``."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, folder)] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def is_done(out: str, entry: dict[str, Any] | None, input_hash: str, settings_hash: str) -> bool:
    """The entry vouches for complete, unchanged outputs of this input under these settings."""
    if not entry or entry.get("status") != "ok":
        return False
    if entry.get("input_hash") != input_hash or entry.get("settings_hash") != settings_hash:
        return False
    folder = os.path.join(out, MODELS, entry["key"])
    try:
        return hash_tree(folder) == entry.get("files")
    except OSError:
        return False


def new_stage(out: str, key: str) -> str:
    os.makedirs(os.path.join(out, STAGING), exist_ok=True)
    stage = tempfile.mkdtemp(prefix=key + ".", dir=os.path.join(out, STAGING))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(stage, 0o777 & ~umask)  # mkdtemp's 0700 would outlive the rename
    return stage


def discard(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def switch_in(out: str, key: str, stage: str | None) -> None:
    """Make ``stage`` the outputs of ``key`` (None: remove them); renames only, the old folder
    is moved aside first and deleted last."""
    final = os.path.join(out, MODELS, key)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    old = None
    if os.path.lexists(final):
        old = tempfile.mkdtemp(prefix=key + ".old.", dir=os.path.join(out, STAGING))
        os.rename(final, os.path.join(old, "x"))
    if stage is not None:
        os.rename(stage, final)
    if old:
        discard(old)


def clean_staging(out: str) -> None:
    """Work left by a job that was killed (only ever our own files)."""
    discard(os.path.join(out, STAGING))
