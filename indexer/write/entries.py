"""The memory entries of a namespace, read from the files: ``list``, ``export`` and ``stats``.

An *entry* is what ``remember`` writes and ``forget`` removes: a list item outside
code fences and USER blocks (:class:`memoryd.indexer.markdown.mdlines.MdLines`). The files
are the source of truth, so these views read them, not the index: an entry the user
typed a second ago is listed even before it is searchable.

Each entry carries what the file says about it:

* ``type`` — from where it lies: the router's file (``user/preferences.md`` →
  ``preference``, ``memory/DATE.md`` → ``journal``) or, in a ``MEMORY.md`` of a
  peer or group, its section; None when neither says;
* ``reinforcements`` / ``importance`` — the entry's marker
  (:mod:`memoryd.indexer.markdown.entrymeta`), plus an older memoryd's front-matter mappings
  (entry id → count); None when neither records anything;
* ``created`` — the day of a journal file or of a dated section heading, else the
  front matter's ``created:``; ``updated`` — the front matter's ``updated:``, else
  the file's modification time.

Only the first root holds namespaces (the other roots are read-only notes).
Files are read with :func:`memoryd.indexer.ingestion.files.read_memory_file` without
following links, so a listing never leaves its namespace; the caller adds the
session's own check (``accept``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd.indexer.access import NAMESPACE_FOLDERS, Namespace, namespace_of
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.ingestion.files import read_memory_file, walk_root
from memoryd.indexer.markdown.mdedit import entry_id
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.memblocks import BlockError
from memoryd.indexer.write.router import BANK_RULES, RULES

_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})")
_JOURNAL = re.compile(r"(?:^|/)memory/(\d{4}-\d{2}-\d{2})\.md$")
_SCALAR = re.compile(r"^([A-Za-z_]+)[ \t]*:[ \t]*[\"']?(.*?)[\"']?[ \t]*$")
_CHILD = re.compile(r"^[ \t]+[\"']?([0-9a-f]{8})[\"']?[ \t]*:[ \t]*(\d+)[ \t]*$")
_BY_FILE = {r.target: r.memory_type for r in RULES if "{" not in r.target}
_BY_SECTION = {("journal" if r.memory_type == "journal" else r.section).casefold(): r.memory_type
               for r in (*RULES, *BANK_RULES)}  # a peer's Current Focus exports as "focus" and imports back there
Accept = Callable[[str], bool]


@dataclass(frozen=True)
class EntryInfo:
    """One entry as ``list`` and ``export`` show it (``start_line``..``end_line`` 1-based, inclusive)."""

    path: str
    start_line: int
    end_line: int
    text: str
    namespace: str
    type: str | None
    section: str | None
    id: str
    importance: int | None
    reinforcements: int | None
    created: str | None
    updated: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def day(self) -> str | None:
        """The date the date filters compare: created, else the day of ``updated``."""
        return self.created or (self.updated[:10] if self.updated else None)


@dataclass(frozen=True)
class MemoryFile:
    """A memory file of the first root, read."""

    rel: str
    namespace: Namespace
    text: str
    size: int
    mtime: float


def memory_files(root: Path, namespace: Namespace | None, accept: Accept, max_bytes: int) -> list[MemoryFile]:
    """The readable ``.md`` files of ``namespace`` (None: every namespace) under ``root``, sorted by path.

    Links are not followed and unreadable or oversized files are left out (the index's
    ``status`` lists why); ``accept(rel)`` is the caller's last word on each file.
    """
    base = root / namespace.folder if namespace is not None and namespace.folder else root
    prefix = f"{namespace.folder}/" if namespace is not None and namespace.folder else ""
    top = set(NAMESPACE_FOLDERS.values())

    def want_dir(sub: str) -> bool:
        return not (namespace is not None and namespace.kind == "default" and sub in top)

    out = []
    for sub, _st in walk_root(base, lambda sub: sub.endswith(".md"), want_dir):
        rel = prefix + sub
        ns = namespace_of(rel)
        if (namespace is not None and ns != namespace) or not accept(rel):
            continue
        try:
            content = read_memory_file(root / rel, root, max_bytes, follow_symlinks=False)
        except FileSkipped:
            continue
        out.append(MemoryFile(rel, ns, content.text, content.size, content.mtime_ns / 1e9))
    return sorted(out, key=lambda f: f.rel)


def file_entries(f: MemoryFile) -> list[EntryInfo]:
    """Every entry of one file with its metadata (none for a file whose block markers are broken)."""
    try:
        doc = MdLines(f.text)
    except BlockError:
        return []
    front = _front_matter(doc)
    reinforced, importance = front.maps.get("reinforcement", {}), front.maps.get("importance", {})
    updated = front.scalars.get("updated") or datetime.fromtimestamp(f.mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    journal = _JOURNAL.search(f.rel)
    headings = sorted(doc.headings, key=lambda h: h.index)
    out = []
    for e in doc.entries:
        section = next((h.title for h in reversed(headings) if h.index < e.index), None)
        eid = entry_id(e.text)
        day = journal.group(1) if journal else _dated(section) or front.scalars.get("created")
        imp, count = importance.get(eid), reinforced.get(eid)  # an older memoryd's front-matter mappings
        if e.meta is not None:  # the entry's own marker wins: it moves with the entry
            imp = e.meta.importance if e.meta.importance is not None else imp
            count = e.meta.reinforced + (count or 0) if e.meta.reinforced or count else count
        out.append(EntryInfo(f.rel, e.index + 1, e.end, e.text, str(f.namespace), _type_of(f, section), section,
                             eid, imp, count, day, updated))
    return out


def select(files: Iterable[MemoryFile], *, memory_type: str | None = None, since: str | None = None,
           until: str | None = None) -> Iterator[EntryInfo]:
    """The entries of ``files`` in (path, line) order, filtered by type and by day (inclusive ISO dates)."""
    for f in files:
        for e in file_entries(f):
            if memory_type is not None and e.type != memory_type:
                continue
            day = e.day
            if (since is not None or until is not None) and day is None:
                continue
            if (since is not None and day is not None and day < since) or (until is not None and day is not None
                                                                           and day > until):
                continue
            yield e


def page(entries: Iterable[EntryInfo], after: str | None, limit: int) -> tuple[list[EntryInfo], str | None]:
    """At most ``limit`` entries after cursor ``after``, and the cursor of the next page (None: the last).

    A cursor is ``PATH:LINE`` of the last entry returned: entries before it in (path, line)
    order are skipped, so a page stays right when earlier files gain or lose entries.
    """
    start = _cursor(after)
    out: list[EntryInfo] = []
    for e in entries:
        if start is not None and (e.path, e.start_line) <= start:
            continue
        if len(out) == limit:
            last = out[-1]
            return out, f"{last.path}:{last.start_line}"
        out.append(e)
    return out, None


def stats(files: Iterable[MemoryFile]) -> dict[str, dict[str, int]]:
    """Per namespace: files, entries and bytes (of the files), namespaces sorted by name."""
    acc: dict[str, dict[str, int]] = defaultdict(lambda: {"files": 0, "entries": 0, "bytes": 0})
    for f in files:
        row = acc[str(f.namespace)]
        row["files"] += 1
        row["bytes"] += f.size
        row["entries"] += len(file_entries(f))
    return {k: acc[k] for k in sorted(acc)}


def _cursor(after: str | None) -> tuple[str, int] | None:
    if after is None:
        return None
    path, sep, line = after.rpartition(":")
    if not sep or not path or not line.isdigit():
        raise ValueError(f"cursor {after[:80]!r} must be PATH:LINE, as a previous page returned it")
    return path, int(line)


def _dated(section: str | None) -> str | None:
    m = _DAY.fullmatch(section.strip()) if section else None
    return m.group(1) if m else None


def _type_of(f: MemoryFile, section: str | None) -> str | None:
    """The router type of an entry in ``f`` under ``section`` (None: the file and section say nothing)."""
    if f.namespace.layout == "single":
        return _BY_SECTION.get((section or "").casefold())
    inner = f.rel[len(f.namespace.folder) + 1:] if f.namespace.folder else f.rel
    if _JOURNAL.search("/" + inner):
        return "journal"
    return _BY_FILE.get(inner)


@dataclass(frozen=True)
class _Front:
    scalars: dict[str, str]
    maps: dict[str, dict[str, int]]


def _front_matter(doc: MdLines) -> _Front:
    """The flat keys and the ``id: count`` mappings of the YAML front matter (what memoryd writes there)."""
    scalars: dict[str, str] = {}
    maps: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    if doc.body_start < 2 or doc.content(0).rstrip() != "---":
        return _Front(scalars, maps)
    for i in range(1, doc.body_start - 1):
        line = doc.content(i)
        child = _CHILD.match(line)
        if child and current is not None:
            current[child.group(1)] = int(child.group(2))
            continue
        m = _SCALAR.match(line)
        current = None
        if m and m.group(2):
            scalars[m.group(1)] = m.group(2)
        elif m:
            current = maps.setdefault(m.group(1), {})
    return _Front(scalars, maps)
