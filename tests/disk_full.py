"""A full disk, simulated at the system-call seam: ``os.write`` and ``os.fsync`` on files under chosen folders.

Why not a real tmpfs: mounting needs root/CAP_SYS_ADMIN (``tests/daemon/test_faults.py`` skips without it), and
a real full disk cannot be made to fail at *the Nth* write of an edit. Every write path of memoryd ends in
``os.write`` (the history's appends) or ``os.fsync`` (the atomic writer's temp files, the journal), so failing
those is what a full disk does to it. The failing ``os.write`` first writes half of what it was given — a
torn line, as a real disk that fills mid-write leaves — then raises ``ENOSPC``.

:meth:`FullDisk.arm` ``(n)``: the ``n``-th watched call and every one after it fail until :meth:`disarm`
("space comes back"). Calls on other files (pytest's own, the SQLite index's) pass untouched.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_REAL_WRITE = os.write
_REAL_FSYNC = os.fsync


class FullDisk:
    """The shim (see the module docstring); ``calls`` counts the watched calls since :meth:`arm`."""

    def __init__(self, folders: list[Path], match: str = "") -> None:
        self.folders = [str(f.resolve()) + os.sep for f in folders]
        self.match = match  # only files whose name holds this (e.g. "history")
        self.after: int | None = None
        self.calls = 0
        self.failed = 0

    def arm(self, n: int) -> None:
        self.after, self.calls, self.failed = n, 0, 0

    def disarm(self) -> None:
        self.after = None

    def _fails(self, fd: int) -> bool:
        if self.after is None:
            return False
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        if not any(target.startswith(f) for f in self.folders) or self.match not in os.path.basename(target):
            return False
        self.calls += 1
        if self.calls < self.after:
            return False
        self.failed += 1
        return True

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self._fails(fd):
            _REAL_WRITE(fd, bytes(data[: len(data) // 2]))  # what a disk filling mid-write keeps: a torn tail
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return _REAL_WRITE(fd, data)

    def fsync(self, fd: int) -> None:
        if self._fails(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        _REAL_FSYNC(fd)


@contextmanager
def full_disk(monkeypatch: pytest.MonkeyPatch, *folders: Path, match: str = "") -> Iterator[FullDisk]:
    """Install the shim for ``folders`` (disarmed; only names holding ``match``) for the duration of the block."""
    shim = FullDisk(list(folders), match)
    with monkeypatch.context() as m:
        m.setattr(os, "write", shim.write)
        m.setattr(os, "fsync", shim.fsync)
        yield shim
