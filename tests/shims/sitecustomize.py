"""Test-only shim: stop a memoryd subprocess at one exact point of a write and announce it.

Why: random SIGKILLs (``bench/chaos.py``) hit the few microseconds of a
snapshot rename or a COMMIT only by chance. ``tests/e2e/test_chaos_precise.py``
puts this directory on ``PYTHONPATH`` of the daemon it starts; Python imports
``sitecustomize`` at start-up, and this module then wraps the write paths so
that the daemon pauses *inside* the operation, where the test kills it.

Contract (environment, set by the test only):

* ``MEMORYD_SHIM_POINT`` names the point (one of :data:`POINTS`); unset or
  empty: this module does nothing and imports nothing.
* ``MEMORYD_SHIM_DIR`` is a directory. The point fires only while
  ``DIR/armed`` exists (the test creates it once start-up is over) and at most
  once per process. When it fires, ``DIR/reached`` appears (atomically; JSON:
  point, pid, details such as the temp file) and the thread that reached it
  sleeps :data:`PAUSE_S` seconds, holding whatever it holds, before going on.
* ``DIR/loaded`` is written at start-up, so a test can tell "the shim never
  loaded" from "the point was never reached".

The wrapped code is the real code: for the snapshot, ``remember`` and the write-ahead
steps of an edit, ``os`` as seen by :mod:`memoryd.indexer.atomic` (memoryd's one atomic
writer; the temp file's name tells a snapshot from a user's file) and by
:mod:`memoryd.indexer.write.ring` (the history's appends); for SQLite,
:func:`memoryd.indexer.storage.embedded.store._replace_chunks` (which runs inside ``Store.replace_file``'s
transaction).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import time
from typing import Any

POINTS = {
    "faiss_mid_write": "half of the FAISS snapshot's bytes are in its temp file (flushed, fsynced)",
    "faiss_before_rename": "the snapshot temp file is complete and fsynced, not yet renamed over vectors.faiss",
    "sqlite_before_commit": "a file's new chunk, FTS and cache rows are written in the open transaction; no COMMIT",
    "remember_mid_write": "half of the user file's new bytes are in its .memoryd-tmp sibling (flushed, fsynced)",
    "remember_before_rename": "the user file's .memoryd-tmp sibling is complete, not yet renamed over the file",
    "edit_journaled": "a memory-file edit's journal/j-*.json is durable; the file is not yet replaced",
    "edit_written": "a journaled edit's memory file is replaced; its history records are not yet appended",
    "edit_recorded": "a journaled edit's history records are appended and fsynced; its journal file is not removed",
}
PAUSE_S = 120.0

POINT = os.environ.get("MEMORYD_SHIM_POINT", "")
SHIM_DIR = os.environ.get("MEMORYD_SHIM_DIR", "")
_SNAPSHOT_TMP = re.compile(r"^\.vectors\.faiss\.[^.]+\.tmp$")  # not the ``.tomb`` sidecar's temp file
_JOURNAL = re.compile(r"/journal/j-[0-9a-f]+\.json$")
_fired = False


def _announce(name: str, info: dict[str, Any]) -> None:
    path = os.path.join(SHIM_DIR, name)
    with builtins.open(path + ".part", "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(path + ".part", path)  # the test never reads half a JSON


def _should(point: str) -> bool:
    return point == POINT and not _fired and os.path.exists(os.path.join(SHIM_DIR, "armed"))


def _stop_here(point: str, **details: Any) -> None:
    """Announce ``point`` and pause the calling thread (the test SIGKILLs the process meanwhile)."""
    global _fired
    _fired = True
    _announce("reached", {"point": point, "pid": os.getpid(), **details})
    time.sleep(PAUSE_S)


class _HalfWriter:
    """A binary file whose first ``write`` stops halfway: half the bytes on disk, then :func:`_stop_here`."""

    def __init__(self, fh: Any, point: str, tmp: str) -> None:
        self._fh, self._point, self._tmp = fh, point, tmp

    def write(self, data: bytes) -> int:
        half = len(data) // 2
        self._fh.write(data[:half])
        self._fh.flush()
        os.fsync(self._fh.fileno())
        _stop_here(self._point, tmp=self._tmp, written=half, total=len(data))
        return half + int(self._fh.write(data[half:]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __enter__(self) -> _HalfWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.__exit__(*exc)


class _OsProxy:
    """The ``os`` module as one library module sees it, with some functions replaced."""

    def __init__(self, **overrides: Any) -> None:
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def _atomic_fdopen(fd: int, *args: Any, **kw: Any) -> Any:
    fh = os.fdopen(fd, *args, **kw)
    tmp = os.readlink(f"/proc/self/fd/{fd}")
    if _SNAPSHOT_TMP.match(os.path.basename(tmp)) and _should("faiss_mid_write"):
        return _HalfWriter(fh, "faiss_mid_write", tmp)
    if tmp.endswith(".memoryd-tmp") and _should("remember_mid_write"):
        return _HalfWriter(fh, "remember_mid_write", tmp)
    return fh


def _atomic_replace(src: Any, dst: Any) -> None:
    if os.path.basename(os.fspath(dst)) == "vectors.faiss" and _should("faiss_before_rename"):
        _stop_here("faiss_before_rename", tmp=os.fspath(src), size=os.path.getsize(src))
    if os.fspath(dst).endswith(".md") and _should("remember_before_rename"):
        _stop_here("remember_before_rename", tmp=os.fspath(src), target=os.fspath(dst))
    os.replace(src, dst)
    target = os.fspath(dst)
    if _JOURNAL.search(target) and _should("edit_journaled"):
        _stop_here("edit_journaled", journal=target)
    if target.endswith(".md") and _should("edit_written"):
        _stop_here("edit_written", target=target)


def _history_fsync(fd: int) -> None:
    os.fsync(fd)
    if _should("edit_recorded"):
        _stop_here("edit_recorded", history=os.readlink(f"/proc/self/fd/{fd}"))


def _install() -> None:
    from memoryd.indexer import atomic
    from memoryd.indexer.storage.embedded import store
    from memoryd.indexer.write import ring

    original = store._replace_chunks

    def replace_chunks(c: Any, file_id: int, chunks: Any) -> Any:
        change = original(c, file_id, chunks)
        if change.added and _should("sqlite_before_commit"):
            _stop_here("sqlite_before_commit", file_id=file_id, added=len(change.added),
                       in_transaction=bool(c.in_transaction))
        return change

    store._replace_chunks = replace_chunks  # replace_file looks it up at call time
    atomic.os = _OsProxy(fdopen=_atomic_fdopen, replace=_atomic_replace)  # type: ignore[assignment]
    ring.os = _OsProxy(fsync=_history_fsync)  # type: ignore[assignment]  # the history's appends
    _announce("loaded", {"point": POINT, "pid": os.getpid()})


if POINT:
    if POINT not in POINTS or not SHIM_DIR:
        raise SystemExit(f"memoryd test shim: unknown MEMORYD_SHIM_POINT {POINT!r} or no MEMORYD_SHIM_DIR")
    _install()
