"""A memory folder's files and each file's entry counts, kept between calls, so that ``list`` and
``stats`` stop reading and parsing every memory file on every call.

Why: at 5,000 files and 50,000 entries one ``stats`` read and parsed them all (seconds on a loaded
machine), and the UI's dashboard and entries pages called it on every view. What is kept, and when
it is believed:

* a folder's names, while the folder's ``(mtime_ns, inode)`` is unchanged: creating, removing or
  renaming a file changes its folder's time, and memoryd's own writes and most editors' saves replace
  the file (a rename), so those show at once;
* a file's counts (entries, types, bytes), while its ``(size, mtime_ns, inode, ctime_ns)`` is
  unchanged. A file is stat'ed again when its last check is older than :data:`RECHECK_S` (an in-place
  edit, ``echo >> file``, shows in the counts within that time) — one stat, the read only if it changed;
* a time less than :data:`RACY_S` ago is never believed: a change within the same clock tick keeps the
  time (git's "racy" case), so a folder or file changed that recently is looked at again every call.

The entries a page *shows* are never from here: ``list`` reads the files of its page afresh; only which
files to skip (no entries, none of the wanted type) comes from the counts. No thread of its own: the
callers' threads share one lock, and a call pays for what changed since the last one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memoryd.indexer.access import DEFAULT, NAMESPACE_FOLDERS, Namespace, namespace_of
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.ingestion.files import read_memory_file
from memoryd.indexer.write.entries import MemoryFile, file_entries

RECHECK_S = 10.0
RACY_S = 2.0
Accept = Callable[[str], bool]
_FOLDERED = tuple(f"{folder}/" for folder in NAMESPACE_FOLDERS.values())
_DEFAULT = str(DEFAULT)


def _namespace_name(rel: str) -> str:
    """``str(namespace_of(rel))``, without its path parsing for the common file outside every namespace folder
    (5,000 of those cost ~200 ms under load)."""
    return str(namespace_of(rel)) if rel.startswith(_FOLDERED) else _DEFAULT


@dataclass(frozen=True)
class _Dir:
    key: tuple[int, int]
    files: tuple[str, ...]  # names ending in .md that are not folders (FIFOs too: reading them says why not)
    dirs: tuple[str, ...]  # sub-folders, symlinks to folders not among them (never descended)


@dataclass
class Counts:
    """What one file holds, as last read: ``readable`` False for a file ``memory_files`` would leave out."""

    key: tuple[int, int, int, int]
    checked: float
    readable: bool
    entries: int = 0
    size: int = 0
    types: frozenset[str | None] = frozenset()


class FolderCache:
    """The files under a root and their counts; ``max_bytes`` as ``watch.max_file_bytes`` (larger: left out)."""

    def __init__(self, max_bytes: int, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._max_bytes = max_bytes
        self._clock, self._wall = clock, wall
        self._dirs: dict[str, _Dir] = {}
        self._counts: dict[str, Counts] = {}
        self._lock = threading.Lock()

    def paths(self, root: Path, namespace: Namespace | None, accept: Accept) -> list[str]:
        """The root-relative ``.md`` paths of ``namespace`` (None: all), sorted, as ``memory_files`` walks them."""
        base = root / namespace.folder if namespace is not None and namespace.folder else root
        skip_top = namespace is not None and namespace.kind == "default"
        top = {str(base / folder) for folder in NAMESPACE_FOLDERS.values()} if skip_top else set()
        out: list[str] = []
        cut = len(str(root)) + 1
        with self._lock:
            stack = [str(base)]
            while stack:
                listing = self._listing(stack.pop())
                if listing is None:
                    continue
                stack += [d for d in listing.dirs if d not in top]
                out += [f[cut:] for f in listing.files]
        want = None if namespace is None else str(namespace)
        keep = [rel for rel in out if (want is None or _namespace_name(rel) == want) and accept(rel)]
        return sorted(keep)

    def counts(self, root: Path, rel: str) -> Counts:
        """``rel``'s counts, read again if it changed (or was never read)."""
        return self._counts_of(root, f"{root}/{rel}", rel, self._clock())

    def _counts_of(self, root: Path, path: str, rel: str, now: float) -> Counts:
        known = self._counts.get(path)  # a dict read is atomic; writes take the lock
        if known is not None and now - known.checked < RECHECK_S and not self._racy(known.key[1]):
            return known
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return self._put(path, Counts((0, 0, 0, 0), now, False))
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        if known is not None and known.key == key and not self._racy(st.st_mtime_ns):
            known.checked = now
            return known
        read = self.read(root, rel)
        if read is None:
            return self._put(path, Counts(key, now, False))
        return read[1]

    def read(self, root: Path, rel: str) -> tuple[MemoryFile, Counts] | None:
        """``rel`` read now (None where ``memory_files`` would leave it out), its counts kept."""
        path = root / rel
        try:
            st = os.stat(path, follow_symlinks=False)
            content = read_memory_file(path, root, self._max_bytes, follow_symlinks=False)
        except (OSError, FileSkipped):
            return None
        f = MemoryFile(rel, namespace_of(rel), content.text, content.size, content.mtime_ns / 1e9)
        entries = file_entries(f)
        counts = Counts((st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns), self._clock(), True,
                        len(entries), content.size, frozenset(e.type for e in entries))
        return f, self._put(f"{root}/{rel}", counts)

    def files_from(self, root: Path, rels: list[str], after: str | None = None,
                   memory_type: str | None = None) -> Iterator[MemoryFile]:
        """The files of ``rels`` (sorted) from path ``after`` on, read lazily; files whose counts say they hold
        no entry (of ``memory_type``, when given) are skipped unread."""
        for rel in rels:
            if after is not None and rel < after:
                continue
            c = self.counts(root, rel)
            if not c.readable or not c.entries or (memory_type is not None and memory_type not in c.types):
                continue
            got = self.read(root, rel)
            if got is not None:
                yield got[0]

    def stats(self, root: Path, rels: list[str]) -> dict[str, dict[str, int]]:
        """Per namespace: files, entries and bytes, as :func:`memoryd.indexer.write.entries.stats` counts them."""
        acc: dict[str, dict[str, int]] = {}
        now, base = self._clock(), f"{root}/"
        for rel in rels:
            c = self._counts_of(root, base + rel, rel, now)
            if not c.readable:
                continue
            row = acc.setdefault(_namespace_name(rel), {"files": 0, "entries": 0, "bytes": 0})
            row["files"] += 1
            row["entries"] += c.entries
            row["bytes"] += c.size
        return {k: acc[k] for k in sorted(acc)}

    def _put(self, path: str, counts: Counts) -> Counts:
        with self._lock:
            self._counts[path] = counts
        return counts

    def _racy(self, mtime_ns: int) -> bool:
        return self._wall() - mtime_ns / 1e9 < RACY_S

    def _listing(self, folder: str) -> _Dir | None:
        """``folder``'s names (the lock held), scanned again only when its time says it changed."""
        try:
            st = os.stat(folder)
        except OSError:
            self._dirs.pop(folder, None)
            return None
        key = (st.st_mtime_ns, st.st_ino)
        known = self._dirs.get(folder)
        if known is not None and known.key == key and not self._racy(st.st_mtime_ns):
            return known
        files, dirs = [], []
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir:
                        dirs.append(entry.path)
                    elif entry.name.endswith(".md"):
                        files.append(entry.path)
        except OSError:
            self._dirs.pop(folder, None)
            return None
        if known is not None:  # forget the counts of files gone from it
            still = set(files)
            for gone in [p for p in known.files if p not in still]:
                self._counts.pop(gone, None)
        listing = _Dir(key, tuple(files), tuple(dirs))
        self._dirs[folder] = listing
        return listing
