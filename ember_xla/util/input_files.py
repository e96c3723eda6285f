"""Opening the files a user names (models, ``--inputs``, flagfiles, targets, plans): a FIFO,
device or socket is refused before it is opened, since reading one blocks forever (a FIFO
nobody writes, a socket) or never ends (``/dev/zero``); and the open itself cannot block
(``O_NONBLOCK``, then ``fstat`` of what was really opened). Every refusal is a
``SpecialFileError`` (a ``ValueError``) whose message names the path."""

from __future__ import annotations

import fcntl
import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class SpecialFileError(ValueError):
    def __init__(self, path: str, kind: str):
        super().__init__(f"{path}: is {kind}, not a regular file (reading it could block); "
                         "refused")
        self.path, self.kind = path, kind


def special_kind(mode: int) -> str | None:
    """What kind of special file ``mode`` (``st_mode``) describes; None for files and folders."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None


def refuse_special(path: str) -> None:
    """Raise ``SpecialFileError`` if ``path`` (links followed) is a FIFO, device or socket;
    a path that does not exist is left to the caller's open to report."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    kind = special_kind(mode)
    if kind:
        raise SpecialFileError(path, kind)


def refuse_special_tree(folder: str) -> None:
    """``refuse_special`` for every entry under ``folder`` (a SavedModel's files)."""
    for root, _, files in os.walk(folder):
        for name in files:
            refuse_special(os.path.join(root, name))


def open_regular(path: str) -> BinaryIO:
    """``open(path, "rb")`` that refuses special files and never blocks in the open."""
    refuse_special(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind:  # replaced between the stat and the open
            raise SpecialFileError(path, kind)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
