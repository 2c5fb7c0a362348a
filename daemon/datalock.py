"""One writer per index: an exclusive ``flock`` on ``DATA_DIR/memoryd.lock``.

Two daemons (or a daemon and ``memoryd index``) writing one index would
corrupt nothing — SQLite serialises them — but they would fight over the
FAISS snapshot and double the work. The lock makes the second one refuse to
start with a message naming the holder. ``search --offline`` takes no lock.
The kernel drops the lock when the process dies, so a kill -9 leaves nothing
stale behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from memoryd.indexer.errors import IndexInUseError, StoreError


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "memoryd.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise IndexInUseError naming the pid that holds it."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot create the lock file {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise IndexInUseError(
                f"the index in {self.path.parent} is in use by another memoryd (pid {holder}); "
                "stop it first, or use `memoryd reindex` to ask it to index"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None
