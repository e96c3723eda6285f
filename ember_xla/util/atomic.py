"""Atomic outputs. ``write_atomic``: one file, via a temp file in the target folder, fsync and
rename. ``write_folder_atomic``: a whole folder of files, built complete in a sibling staging
folder and swapped in with one ``renameat2(RENAME_EXCHANGE)``, so a reader (or a crash, even
SIGKILL) sees the complete old folder or the complete new one, never a mix. Files and folders
get the usual ``0666``/``0777`` minus the umask, like any other tool's outputs."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import time
import uuid

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _test_pause(what: str) -> None:
    """Test hook (``EMBER_XLA_TEST_PAUSE_WRITES=seconds``): announce each step on stderr and
    pause after it, so a test can SIGKILL between any two writes."""
    pause = os.environ.get("EMBER_XLA_TEST_PAUSE_WRITES")
    if pause:
        print(f"ember-xla: test hook: {what}", file=sys.stderr, flush=True)
        time.sleep(float(pause))


def _write_file(path: str, data: bytes | str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes | str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}")
    try:
        _write_file(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2); False if the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL / ENOSYS / EOPNOTSUPP: filesystem cannot exchange
        return False
    raise OSError(err, os.strerror(err), b)


def write_folder_atomic(target: str, files: dict[str, bytes | str]) -> None:
    """Make ``target`` hold exactly ``files`` (relative path -> content), atomically as a
    whole. Every content must be ready before the call: nothing is written on an error."""
    target = os.path.abspath(target)
    parent, base = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    staging = os.path.join(parent, f".{base}.ember-new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.mkdir(staging)  # 0777 minus the umask
    try:
        for rel, data in files.items():
            path = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write_file(path, data)
            _test_pause(f"wrote {rel}")
        for folder, _, _ in os.walk(staging):
            _fsync_dir(folder)
        if not os.path.exists(target):
            os.rename(staging, target)
        elif _exchange(staging, target):
            _test_pause("swapped")
            shutil.rmtree(staging)  # the old result, now under the staging name
        else:  # no atomic exchange: move the old result aside first (never a mix, briefly none)
            aside = staging + ".old"
            os.rename(target, aside)
            os.rename(staging, target)
            shutil.rmtree(aside)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
