"""Writing a file without ever leaving it truncated or half-written: the one writer memoryd has.

Every write goes to a temp file in the same directory, is fsynced, then
renamed over the target (and the directory fsynced), so a crash at any instant
leaves either the old or the new file. A user's file keeps its permission bits;
memoryd's own files (vector snapshot, model cache, write history) are 0600.
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
import time
from pathlib import Path

from memoryd.indexer.errors import MemorydError


class ConcurrentEditError(MemorydError):
    """The file changed between our read and our write; re-read and try again."""


TEMP_SUFFIX = ".memoryd-tmp"
"""Ends the name of every temp file :func:`atomic_write_bytes` makes next to a user's file."""

DATA_TEMP_SUFFIX = ".tmp"
"""Ends the name of the temp files written next to memoryd's own files (in the data dir and the model cache):
no watcher looks there, and a killed write's leftovers are found by :func:`remove_stale_temps`."""


def is_own_temp(name: str) -> bool:
    """Whether ``name`` (a file name) is one of our temp files (``.<target>.<random>.memoryd-tmp``)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def file_sha256(*paths: Path) -> str:
    """Hex sha256 over the bytes of ``paths`` in order, read in 1 MiB pieces; raises OSError."""
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def current_sha256(path: Path) -> str | None:
    """:func:`file_sha256` of one file, or None if it does not exist (a conditional write's precondition)."""
    try:
        return file_sha256(path)
    except FileNotFoundError:
        return None


def atomic_write_bytes(path: Path, data: bytes, expected_sha256: str | None = None, *, check: bool = False,
                       new_mode: int = 0o600, keep_mode: bool = True, temp_suffix: str = TEMP_SUFFIX) -> None:
    """Replace ``path`` with ``data`` atomically; raises OSError (the temp file is removed first).

    With ``check=True`` the write happens only if the file's current sha256 is
    ``expected_sha256`` (None: the file must not exist), else
    :class:`ConcurrentEditError`. The check and the rename are not one atomic
    step — a user saving in that microsecond window can still win or lose — but
    the window is microseconds, not the duration of an edit. New files get
    ``new_mode``; existing ones keep theirs unless ``keep_mode`` is False.
    The temp file is ``.<name>.<random><temp_suffix>`` beside ``path``.
    """
    directory = path.parent
    mode = new_mode
    if keep_mode:
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=temp_suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if check and current_sha256(path) != expected_sha256:
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


def remove_stale_temps(path: Path, *, older_than_s: float = 0.0, temp_suffix: str = DATA_TEMP_SUFFIX) -> list[Path]:
    """Delete the temp files that killed writes of ``path`` left (``.<name>.*<temp_suffix>``); returns what went.

    Only for a caller that knows no live write of ``path`` is under way (the data dir's
    lock holder, the model cache's build lock), or with ``older_than_s`` longer than a
    live write can take.
    """
    now = time.time()
    gone = []
    for tmp in path.parent.glob(f".{path.name}.*{temp_suffix}"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime >= older_than_s:
                tmp.unlink()
                gone.append(tmp)
    return gone


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
