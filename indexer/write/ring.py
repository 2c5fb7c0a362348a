"""One ring of the write history (:mod:`memoryd.indexer.write.history`): a bounded JSON-lines file whose
appends are whole or absent.

A kill or a full disk can cut an append short. Before each append (and at start,
:meth:`Ring.heal`) a torn tail — bytes after the last newline — is cut off, so a new
record never glues onto it (a glued line parses as nothing: the new record would be
lost with the torn one); an append whose write or fsync fails truncates the file back
to its size before the append. A record of an edit never acknowledged is all that a cut
tail ever held (the edit's journal file still holds it). Readers skip a torn last line.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, atomic_write_bytes

log = structlog.get_logger(__name__)

FILE_MODE = 0o600


class Ring:
    """One bounded JSON-lines file, parsed once and then only its new tail (the file is append-only
    between trims; a trim or an outside rewrite is seen as a shrink or a new inode and read again)."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._recs: list[dict[str, Any]] = []
        self._seen: tuple[int, int] = (-1, 0)  # (inode, bytes parsed)

    def append(self, *recs: dict[str, Any]) -> int:
        """Append ``recs`` in one write and one fsync, whole or not at all; returns the file's size.

        A torn tail (a line a kill or a full disk cut short) is cut off first, so the new records
        never glue onto it; a write or fsync that fails (ENOSPC) truncates the file back to what it
        was before raising, so no part of these records stays behind.
        """
        line = b"".join((json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
                        for rec in recs)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            start = heal_fd(fd, self.path)
            try:
                _write_all(fd, line)
                os.fsync(fd)  # the journal file of the edit is removed once this returns
            except OSError:
                with contextlib.suppress(OSError):  # truncating needs no free space
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                raise
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def heal(self) -> None:
        """Cut a torn tail off the file now (at start, under the data-dir lock)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            heal_fd(fd, self.path)
        finally:
            os.close(fd)

    def records(self) -> list[dict[str, Any]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._recs, self._seen = [], (-1, 0)
            return []
        inode, done = self._seen
        if st.st_ino != inode or st.st_size < done:
            self._recs, done = [], 0
        if st.st_size > done:
            with self.path.open("rb") as f:
                f.seek(done)
                data = f.read()
            complete = data.rfind(b"\n") + 1  # a torn last line is read again once it is whole
            self._recs.extend(parse_lines(data[:complete]))
            done += complete
        self._seen = (st.st_ino, done)
        return self._recs

    def trim_plan(self, newest: int) -> tuple[list[bytes], list[dict[str, Any]]]:
        """The lines a trim keeps — the newest that fit in half of ``max_bytes``, and always the
        ``newest`` just appended, so a large edit never pushes out its own records — and the
        records it drops."""
        lines = self.path.read_bytes().splitlines(keepends=True)
        keep: list[bytes] = []
        total = 0
        for raw in reversed(lines):
            if len(keep) >= newest and total + len(raw) > self.max_bytes // 2:
                break
            keep.append(raw)
            total += len(raw)
        keep.reverse()
        return keep, parse_lines(b"".join(lines[: len(lines) - len(keep)]))

    def rewrite(self, lines: list[bytes]) -> None:
        """Replace the file with ``lines`` through a 0600 temp file and an atomic rename."""
        atomic_write_bytes(self.path, b"".join(lines), keep_mode=False, new_mode=FILE_MODE,
                           temp_suffix=DATA_TEMP_SUFFIX)

    def lines(self) -> list[bytes]:
        try:
            return self.path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return []


def heal_fd(fd: int, path: Path) -> int:
    """Truncate ``fd``'s file after its last newline when its tail is torn; returns the size left."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        chunk = os.pread(fd, min(end, 65536), end - min(end, 65536))
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            end = end - len(chunk) + nl + 1
            break
        end -= len(chunk)
    if end == size:
        return size
    os.ftruncate(fd, end)
    os.fsync(fd)
    log.warning("history.torn_tail_cut", path=str(path), bytes=size - end, kept_bytes=end,
                why="a write was cut short (a kill or a full disk); its edit was never acknowledged")
    return end


def parse_lines(data: bytes) -> list[dict[str, Any]]:
    out = []
    for raw in data.splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(raw)
            if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                out.append(rec)
    return out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
