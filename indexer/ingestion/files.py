"""Reading memory files safely, and walking roots.

A memory folder is the user's, not ours: it may hold binary files, FIFOs named
``x.md``, files that vanish or change while we read them, symlink loops. Every
read here is bounded and non-blocking, and every refusal is a
:class:`~memoryd.indexer.errors.FileSkipped` with a short stable ``reason`` code that
``status`` can list.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.indexer.errors import FileSkipped

# Stable reason codes (shown in `status` and logs).
NOT_REGULAR = "not-a-regular-file"
TOO_LARGE = "too-large"
BINARY = "binary"
UNREADABLE = "unreadable"
VANISHED = "vanished"
OUTSIDE_ROOT = "symlink-outside-root"
SYMLINK = "symlink"  # watch.follow_symlinks = false
CHANGED = "changed-while-reading"


@dataclass(frozen=True)
class FileContent:
    """A decoded memory file and the facts the index keeps about it."""

    text: str
    sha256: str
    size: int
    mtime_ns: int
    warnings: list[str] = field(default_factory=list)


def stat_signature(st: os.stat_result) -> tuple[int, int]:
    return st.st_size, st.st_mtime_ns


def read_memory_file(path: Path, root: Path, max_bytes: int, *, follow_symlinks: bool = True) -> FileContent:
    """Read and decode one file, refusing anything that is not a sane text file.

    A symlink (the file, or a folder on its way under ``root``) is followed only when it
    resolves inside ``root``, and only with ``follow_symlinks`` (``watch.follow_symlinks``).

    Opens with ``O_NONBLOCK`` and checks ``fstat`` before reading, so a FIFO or
    socket never blocks us. A file whose size or mtime changes during the read
    is refused with reason ``changed-while-reading`` (the watcher will bring it
    back). Raises :class:`FileSkipped`.
    """
    rel = str(path)
    if "\x00" in rel or ".." in path.parts:  # callers resolve names first (memoryd.indexer.pathguard); never read these
        raise FileSkipped(rel.replace("\x00", "\\x00"), OUTSIDE_ROOT, "name with '..' or a NUL byte")
    try:
        _check_inside_root(path, root, follow_symlinks)
    except OSError as exc:  # e.g. a name too long for the kernel
        raise FileSkipped(rel, UNREADABLE, exc.strerror or str(exc)) from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise FileSkipped(rel, VANISHED) from None
    except OSError as exc:
        raise FileSkipped(rel, UNREADABLE, exc.strerror or str(exc)) from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise FileSkipped(rel, NOT_REGULAR)
        if before.st_size > max_bytes:
            raise FileSkipped(rel, TOO_LARGE, f"{_mb(before.st_size)} > limit {_mb(max_bytes)} (watch.max_file_bytes)")
        data = _read_all(fd, max_bytes, rel)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if stat_signature(before) != stat_signature(after) or len(data) != after.st_size:
        raise FileSkipped(rel, CHANGED)
    text, warnings = decode_text(data, rel)
    return FileContent(text, hashlib.sha256(data).hexdigest(), after.st_size, after.st_mtime_ns, warnings)


def _mb(n: int) -> str:
    """A size as the user reads it (``12.0 MB``), so a skip reason names what to raise and by how much."""
    return f"{n / 1_000_000:.1f} MB"


def _read_all(fd: int, max_bytes: int, rel: str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            block = os.read(fd, 1 << 20)
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                raise FileSkipped(rel, NOT_REGULAR, "read would block") from None
            raise FileSkipped(rel, UNREADABLE, exc.strerror or str(exc)) from None
        if not block:
            return b"".join(parts)
        total += len(block)
        if total > max_bytes:
            raise FileSkipped(rel, TOO_LARGE, f"grew past limit {_mb(max_bytes)} (watch.max_file_bytes) while reading")
        parts.append(block)


def decode_text(data: bytes, rel: str) -> tuple[str, list[str]]:
    """Decode bytes as Markdown text: BOM-aware, NUL means binary, bad UTF-8 is replaced.

    Line endings are normalised to ``\\n`` so line numbers match what editors show. A NUL
    character is refused in UTF-16 text too: no index text may hold one (PostgreSQL's text
    type cannot, and its insert would fail the whole batch).
    """
    warnings: list[str] = []
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
        if "\x00" in text:
            raise FileSkipped(rel, BINARY, "contains NUL characters (UTF-16)")
        warnings.append("decoded as UTF-16 (byte-order mark)")
    else:
        if b"\x00" in data:
            raise FileSkipped(rel, BINARY, "contains NUL bytes")
        if data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8) :]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", errors="replace")
            warnings.append(f"invalid UTF-8 at byte {exc.start}; replaced with U+FFFD")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, warnings


def _check_inside_root(path: Path, root: Path, follow_symlinks: bool = True) -> None:
    """Symlinks are followed only when they resolve inside the root, and only if ``follow_symlinks``."""
    if not path.is_symlink() and not any(p.is_symlink() for p in path.parents if _is_under(p, root)):
        return
    if not follow_symlinks:
        raise FileSkipped(str(path), SYMLINK, "watch.follow_symlinks is false")
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        raise FileSkipped(str(path), VANISHED) from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on older Pythons
        raise FileSkipped(str(path), UNREADABLE, f"cannot resolve symlink: {exc}") from None
    if not _is_under(real, root.resolve()):
        raise FileSkipped(str(path), OUTSIDE_ROOT, f"points to {real}")


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return path != root


def walk_root(
    root: Path, accept: Callable[[str], bool], accept_dir: Callable[[str], bool] = lambda rel: True
) -> Iterator[tuple[str, os.stat_result | None]]:
    """Yield ``(relative posix path, stat)`` for every accepted non-directory under ``root``.

    Directory symlinks are not descended (no loops, no escaping the root).
    Entries that are not regular files (FIFOs, sockets, dangling or looping
    symlinks: stat None) are yielded too, so that reading them records *why*
    they are skipped. Unreadable directories are skipped here.
    """
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            rel = Path(entry.path).relative_to(root).as_posix()
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if accept_dir(rel):
                    stack.append(Path(entry.path))
                continue
            if not accept(rel):
                continue
            try:
                st: os.stat_result | None = entry.stat(follow_symlinks=True)
            except OSError:
                st = None
            if st is None or not stat.S_ISDIR(st.st_mode):
                yield rel, st
