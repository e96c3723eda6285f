"""Atomic outputs. ``write_atomic``: one file, via a temp file in the target folder, fsync and
rename. ``write_folder_atomic``: a whole folder of files, built complete in a sibling staging
folder and swapped in with one ``renameat2(RENAME_EXCHANGE)``, so a reader (or a crash, even
SIGKILL) sees the complete old folder or the complete new one, never a mix.

The rules (docs/RELIABILITY.md): the target is resolved once (a symbolic link is followed and
its target replaced, the link itself stays; a dangling link is refused); an old result that
cannot be deleted (an immutable or append-only entry, a folder without write permission) is
refused before anything is written; every failure before the swap removes the staging folder
and leaves the old result untouched; staging folders and temp files of a killed run (named
after their process, ``.NAME.ember-new-PID-START-HEX``) are removed by the next write next to
them; every I/O error names its path. Files and folders get the usual ``0666``/``0777`` minus
the umask, like any other tool's outputs."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import struct
import sys
import time
import uuid
from collections.abc import Iterator

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_FS_IOC_GETFLAGS = 0x80086601
_FS_IMMUTABLE_FL = 0x10
_FS_APPEND_FL = 0x20
STAGING_MARK = ".ember-new-"
TEMP_MARK = ".ember-tmp-"


class OutputRefused(ValueError):
    """An output path that cannot be replaced as promised; nothing was written."""


def _test_pause(what: str) -> None:
    """Test hook (``EMBER_XLA_TEST_PAUSE_WRITES=seconds``): announce each step on stderr and
    pause after it, so a test can SIGKILL between any two writes."""
    pause = os.environ.get("EMBER_XLA_TEST_PAUSE_WRITES")
    if pause:
        print(f"ember-xla: test hook: {what}", file=sys.stderr, flush=True)
        time.sleep(float(pause))


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """An ``OSError`` raised inside names ``path`` if it named no file itself (a full disk's
    ``write`` or ``fsync`` does not)."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), path) from None
        raise


# -- who made a staging name -----------------------------------------------------------------
def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/PID/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat_line.rsplit(")", 1)[-1].split()[19]


def _owner_tag() -> str:
    pid = os.getpid()
    return f"{pid}-{_start_time(pid) or 0}-{uuid.uuid4().hex[:8]}"


def _owner_alive(tag: str) -> bool:
    """Whether the process that made a name with this tag still runs (pid and start time)."""
    parts = tag.split("-")
    if len(parts) < 3 or not parts[0].isdigit():
        return False
    started = _start_time(int(parts[0]))
    return started is not None and started == parts[1]


def remove_stale(parent: str, base: str) -> list[str]:
    """Remove the staging folders and temp files for ``parent/base`` left by runs that are no
    longer alive; returns what was removed. A live run's are left alone."""
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        for mark in (STAGING_MARK, TEMP_MARK):
            prefix = f".{base}{mark}"
            if not name.startswith(prefix) or _owner_alive(name[len(prefix):]):
                continue
            path = os.path.join(parent, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            if not os.path.lexists(path):
                removed.append(path)
    return removed


# -- the target ----------------------------------------------------------------------------
def resolve_output(path: str) -> str:
    """The absolute path an output really goes to: symbolic links followed (the link's target
    is replaced, the link stays); a dangling link is refused."""
    p = os.path.abspath(path)
    real = os.path.realpath(p)
    if os.path.islink(p) and not os.path.exists(p):
        raise OutputRefused(f"{path}: a symbolic link to {real}, which does not exist; give "
                            "the target itself")
    return real


def _flags(path: str) -> int:
    """The inode flags (chattr) of a file or folder; 0 where the filesystem has none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return 0
    try:
        return struct.unpack("i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4])[0]
    except OSError:
        return 0
    finally:
        os.close(fd)


def check_removable(folder: str) -> None:
    """Refuse (before anything is written) an old result whose deletion would fail half-way:
    an immutable or append-only entry, or a folder whose entries cannot be unlinked."""
    for root, dirs, files in os.walk(folder):
        if not os.access(root, os.W_OK | os.X_OK):
            raise OutputRefused(f"{root}: no permission to delete the old result in it")
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            flags = _flags(path)
            if flags & (_FS_IMMUTABLE_FL | _FS_APPEND_FL):
                what = "immutable" if flags & _FS_IMMUTABLE_FL else "append-only"
                raise OutputRefused(f"{path}: the old result holds an {what} file (chattr), "
                                    "so it cannot be replaced; nothing was written")
    if _flags(folder) & (_FS_IMMUTABLE_FL | _FS_APPEND_FL):
        raise OutputRefused(f"{folder}: immutable or append-only (chattr), cannot be replaced")


# -- writing -------------------------------------------------------------------------------
def _write_file(path: str, data: bytes | str) -> None:
    with naming(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    with naming(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_writable(target: str) -> None:
    """Refuse (before any work) an output folder that is a file or cannot be made: a probe
    folder is made and removed where the nearest existing ancestor of ``target`` is
    (permissions alone do not tell: root may "write" /proc, where nothing can be made)."""
    if os.path.lexists(target) and not os.path.isdir(target):
        raise OutputRefused(f"{target}: exists and is not a folder")
    parent = os.path.dirname(os.path.abspath(target))
    while not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise OutputRefused(f"{target}: {parent} exists and is not a folder")
        parent = os.path.dirname(parent)
    probe = os.path.join(parent, f".ember-probe-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(probe)
    except OSError as e:
        raise OutputRefused(f"{target}: cannot write in {parent} ({e.strerror})") from None
    os.rmdir(probe)


def _makedirs(path: str) -> None:
    with naming(path):
        os.makedirs(path, exist_ok=True)


def write_atomic(path: str, data: bytes | str) -> None:
    """Replace the file ``path`` (through a symbolic link: its target) with ``data``."""
    path = resolve_output(path)
    folder, base = os.path.split(path)
    _makedirs(folder)
    if os.path.isdir(path):
        raise OutputRefused(f"{path}: is a folder, expected a file")
    remove_stale(folder, base)
    tmp = os.path.join(folder, f".{base}{TEMP_MARK}{_owner_tag()}")
    try:
        _write_file(tmp, data)
        with naming(path):
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
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
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # filesystem cannot exchange
        return False
    raise OSError(err, os.strerror(err), b)


def _warn_leftover(path: str, e: OSError) -> None:
    print(f"ember-xla: warning: the new result is in place, but the old one at {path} could "
          f"not be deleted ({e.strerror}); the next run removes it", file=sys.stderr)


def _swap_in(staging: str, target: str) -> None:
    """The commit point: after it the new result stands. Deleting the old one is cleanup (it
    was checked deletable; should it still fail, its staging name marks it for the next
    run)."""
    if not os.path.lexists(target):
        with naming(target):
            os.rename(staging, target)
        return
    if _exchange(staging, target):
        _test_pause("swapped")
        try:
            shutil.rmtree(staging)  # the old result, now under the staging name
        except OSError as e:
            _warn_leftover(staging, e)
        return
    aside = staging + ".old"  # no atomic exchange: move the old result aside (briefly none)
    with naming(target):
        os.rename(target, aside)
    try:
        with naming(target):
            os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    try:
        shutil.rmtree(aside)
    except OSError as e:
        _warn_leftover(aside, e)


def write_folder_atomic(target: str, files: dict[str, bytes | str]) -> None:
    """Make ``target`` hold exactly ``files`` (relative path -> content), atomically as a
    whole. Every content must be ready before the call: nothing is written on an error."""
    target = resolve_output(target)
    parent, base = os.path.split(target)
    if os.path.lexists(target):
        if not os.path.isdir(target):
            raise OutputRefused(f"{target}: exists and is not a folder")
        check_removable(target)
    _makedirs(parent)
    remove_stale(parent, base)
    staging = os.path.join(parent, f".{base}{STAGING_MARK}{_owner_tag()}")
    with naming(staging):
        os.mkdir(staging)  # 0777 minus the umask
    try:
        for rel, data in files.items():
            path = os.path.join(staging, rel)
            _makedirs(os.path.dirname(path))
            _write_file(path, data)
            _test_pause(f"wrote {rel}")
        for folder, _, _ in os.walk(staging):
            _fsync_dir(folder)
        _swap_in(staging, target)
        _fsync_dir(parent)
    except BaseException:
        if os.path.isdir(staging) and not os.path.islink(staging):
            shutil.rmtree(staging, ignore_errors=True)
        raise

