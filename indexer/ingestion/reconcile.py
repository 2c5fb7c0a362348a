"""Reconcile: make the index match the roots as they are on disk now.

Used at start-up, by the periodic sweep, after a watcher failure and by
``memoryd index``. Cheap when nothing changed: size + mtime are compared
first, and only files that differ are read (their sha256 then decides whether
anything is re-chunked). Files of roots that are no longer configured are
dropped — on a shared database (PostgreSQL) only when this process holds that
root's lock (the index's ``claim_root``), so it never removes the rows of a root
another process indexes. Temp files of :func:`memoryd.indexer.atomic.atomic_write_bytes` that a killed
writer left behind (never indexed: the path filter excludes them) are removed:
only our own name pattern, and the single writer of this index is the thread
running the reconcile, so no write of ours is in flight. (Another memoryd
writing the same folder with another data directory would see its write fail
cleanly, its target untouched.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from memoryd.indexer.atomic import is_own_temp
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.ingestion.files import walk_root
from memoryd.indexer.ingestion.indexstats import IndexStats, Progress, printable_name

log = structlog.get_logger(__name__)

Accept = Callable[[str], bool]


@dataclass
class ReconcilePlan:
    to_index: list[tuple[Path, str]] = field(default_factory=list)
    to_remove: list[tuple[Path, str]] = field(default_factory=list)
    unchanged: int = 0
    temp_files: list[Path] = field(default_factory=list)  # our own, left by a killed writer
    seen: set[str] = field(default_factory=set)  # "root/rel" of every accepted file found


def plan(
    index: MemoryIndex, roots: Sequence[Path], accept: Accept, accept_dir: Accept | None = None
) -> ReconcilePlan:
    """Compare disk and index without reading any file's content."""
    result = ReconcilePlan()
    for root in roots:
        known = index.store.files(index.store.root_id(root))
        seen: set[str] = set()
        if root.is_dir():
            def accept_or_note(rel: str, root: Path = root) -> bool:
                if is_own_temp(rel.rpartition("/")[2]):
                    result.temp_files.append(root / rel)
                    return False
                return accept(rel)

            for rel, st in walk_root(root, accept_or_note, accept_dir or (lambda rel: True)):
                seen.add(rel)
                result.seen.add(printable_name(f"{root}/{rel}"))
                row = known.get(rel)
                if row is not None and st is not None and (row.size, row.mtime_ns) == (st.st_size, st.st_mtime_ns):
                    result.unchanged += 1
                else:
                    result.to_index.append((root, rel))
        else:
            log.warning("root.missing", root=str(root))
        result.to_remove += [(root, rel) for rel in known if rel not in seen]
    wanted = {str(r) for r in roots}
    for root_id, root in index.store.roots().items():
        if str(root) in wanted:
            continue
        if not index.claim_root(root):  # a shared database: only under the root's lock
            log.warning("reconcile.root_kept", root=str(root), reason="another process holds its lock",
                        action="its rows are that process's to keep or remove")
            continue
        result.to_remove += [(root, rel) for rel in index.store.files(root_id)]
    return result


def reconcile(
    index: MemoryIndex, roots: Sequence[Path], accept: Accept, accept_dir: Accept | None = None,
    progress: Progress | None = None, defer_at: int | None = None,
) -> IndexStats:
    """Bring the index in line with ``roots``; returns what was done.

    ``defer_at``: keyword first for large sweeps (see :meth:`MemoryIndex.index_files`)."""
    p = plan(index, roots, accept, accept_dir)
    stats = IndexStats()
    for root, rel in p.to_remove:
        stats.chunks_removed += index.remove_file(root, rel)
        stats.files_removed += 1
    _forget_gone_skips(index, roots, p.seen)
    stats.merge(index.index_files(p.to_index, progress=progress, defer_at=defer_at))
    stats.files_unchanged += p.unchanged
    index.save()
    _remove_found_temps(p.temp_files)
    log.info("reconcile.done", roots=len(roots), indexed=stats.files_indexed, removed=stats.files_removed,
             unchanged=stats.files_unchanged, skipped=stats.files_skipped, embedded=stats.embedded,
             vectors_pending=len(index.backlog),
             seconds=round(stats.seconds, 2))
    return stats


def _forget_gone_skips(index: MemoryIndex, roots: Sequence[Path], seen: set[str]) -> None:
    """A skipped file that is gone (deleted, or no longer accepted) leaves ``status``'s list: it was
    never indexed, so no removal names it."""
    prefixes = tuple(f"{root}/" for root in roots)
    for key in [k for k in index.skipped if k.startswith(prefixes) and k not in seen]:
        index.skipped.pop(key, None)


def _remove_found_temps(paths: Sequence[Path]) -> None:
    """Remove the temp files of user-file writes that the walk found (their target may be gone, so
    :func:`memoryd.indexer.atomic.remove_stale_temps`, which looks beside one target, would miss them)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            continue  # gone already, or not ours to remove: leave it
        log.warning("temp.removed", path=str(path), reason="left by an interrupted write")
