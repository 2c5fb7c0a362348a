"""Writing a user's Markdown file without ever leaving it truncated or half-written.

Every write goes to a temp file in the same directory, is fsynced, then
renamed over the target (and the directory fsynced), so a crash at any instant
leaves either the old or the new file. The target's permission bits are kept.
``expected_sha256`` makes the write conditional: if the file changed since the
caller read it (a user saved meanwhile), :class:`ConcurrentEditError` is
raised and the caller re-reads and re-applies its edit instead of overwriting
the user's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from memoryd.indexer.errors import MemorydError


class ConcurrentEditError(MemorydError):
    """The file changed between our read and our write; re-read and try again."""


TEMP_SUFFIX = ".memoryd-tmp"
"""Ends the name of every temp file :func:`atomic_write_bytes` makes next to its target."""


def is_own_temp(name: str) -> bool:
    """Whether ``name`` (a file name) is one of our temp files (``.<target>.<random>.memoryd-tmp``)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def file_sha256(path: Path) -> str | None:
    """sha256 of the file's bytes, or None if it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def atomic_write_bytes(path: Path, data: bytes, expected_sha256: str | None = None, *,
                       check: bool = False, new_mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically.

    With ``check=True`` the write happens only if the file's current sha256 is
    ``expected_sha256`` (None: the file must not exist), else
    :class:`ConcurrentEditError`. The check and the rename are not one atomic
    step — a user saving in that microsecond window can still win or lose — but
    the window is microseconds, not the duration of an edit. New files get
    ``new_mode``; existing ones keep theirs.
    """
    directory = path.parent
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = new_mode
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if check and file_sha256(path) != expected_sha256:
            raise ConcurrentEditError(f"{path} changed while memoryd was editing it")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def atomic_write_text(path: Path, text: str, expected_sha256: str | None = None, *, check: bool = False) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text (no newline translation: bytes are kept as given)."""
    atomic_write_bytes(path, text.encode("utf-8"), expected_sha256, check=check)


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
