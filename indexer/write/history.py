"""The write history: every replace, forget, reinforce, clear, section update and undo, with the exact
bytes it changed.

Each edit adds JSON lines to a history file in the data dir — never under a
memory root, so never indexed or searched, and never logged — with what is
needed to put things back (``memoryd undo ID``). The records are written
*ahead* of the edit (:mod:`memoryd.indexer.write.journal`): a kill never
leaves a changed file without them.

========  ===================================================================
field     meaning
========  ===================================================================
id        ``h-`` + 16 hex characters, random (not guessable from the time)
time      ISO 8601 UTC seconds
action    ``replace`` | ``forget`` | ``reinforce`` | ``undo`` | ``clear`` | ``section``
root      the memory root the path is relative to
path      the file, relative to ``root``
line      1-based line of the entry after the action (forget: where it was)
lines     how many lines the old entry spanned (item plus continuation lines)
old       the entry's text before (replace, forget, reinforce: the entry kept)
new       the text after (replace: the new entry; reinforce: the memory *not* written)
block     the old entry's exact lines
patch     the edit as line hunks with terminators and neighbours, and the sha256 of
          what it wrote (:mod:`memoryd.indexer.markdown.patch`): the undo is byte for
          byte while the file is untouched, placed by content after a hand edit
session   who asked (``{"kind": "owner"}`` …), namespace, reason, score
group     (``clear``) one id shared by the records of one clear over several files
undoes    (``undo`` only) the id it reverted; ``covers``: the forget records of a
          cleared file that its undo restored with it
entries   (``clear`` only) the ids of the file's ``forget`` records
section   (``section`` only) the section's title; ``new_block`` the body written
========  ===================================================================

The records keep secrets too: redaction applies to what leaves the daemon
(:mod:`memoryd.daemon.api.history`), not to the record, so every edit can be
undone. The files are created 0600 whatever the umask (``os.open`` with mode
0o600, then ``fchmod``).

Bounds: two rings, each kept under :data:`MAX_BYTES` on its own — the owner's
(``history.jsonl``: the CLI, the owner's agent) and the confined sessions'
(``history-agents.jsonl``) — so no peer can push the owner's records out.
When an append passes a ring's bound, its oldest records are dropped until
half is left (the newest is always kept); an undo dropped takes the record it
undid with it, whichever ring holds that, so a trim never makes an undone
record undoable again. A reinforcement of an entry by the same text as an
earlier reinforcement that is not undone adds no record. One writer appends
(the index worker); appends are whole or absent (:mod:`memoryd.indexer.write.ring`).
:meth:`History.purge` removes one record's texts for good (a forgotten secret).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import remove_stale_temps
from memoryd.indexer.errors import DiskFullError, EntryNotFound, is_disk_full
from memoryd.indexer.write.ring import Ring, parse_lines

log = structlog.get_logger(__name__)

HISTORY_NAME = "history.jsonl"
MAX_BYTES = 4 * 1024 * 1024
MAX_BLOCK_CHARS = 64 * 1024  # an entry longer than this is recorded, but not restorable
REPLACE, FORGET, REINFORCE, UNDO = "replace", "forget", "reinforce", "undo"
CLEAR, SECTION = "clear", "section"  # memoryd.indexer.write.editor: a namespace emptied, a section body replaced
ACTIONS = (REPLACE, FORGET, REINFORCE, UNDO, CLEAR, SECTION)


def new_id() -> str:
    return "h-" + secrets.token_hex(8)


def entry(action: str, root: Path, path: str, line: int, *, old: str | None = None, new: str | None = None,
          block: list[str] | None = None, session: dict[str, str] | None = None, now: datetime | None = None,
          **extra: Any) -> dict[str, Any]:
    """A history record (see the module docstring); ``extra`` adds namespace, reason, score, undoes."""
    if action not in ACTIONS:
        raise ValueError(f"history action must be one of {ACTIONS}, got {action!r}")
    rec: dict[str, Any] = {"id": new_id(), "time": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "action": action, "root": str(root), "path": path, "line": line}
    if block is not None:
        rec["lines"] = len(block)
        if sum(len(b) for b in block) <= MAX_BLOCK_CHARS:
            rec["block"] = block
    rec.update({k: v for k, v in (("old", old), ("new", new), ("session", session)) if v is not None})
    rec.update({k: v for k, v in extra.items() if v is not None})
    return rec


OWNER_RING, AGENT_RING = "owner", "agents"
AGENTS_NAME = "history-agents.jsonl"


def ring_of(rec: dict[str, Any]) -> str:
    """Which ring keeps ``rec``: the owner's (no session, or an owner session) or the agents' (confined)."""
    session = rec.get("session")
    kind = session.get("kind") if isinstance(session, dict) else None
    return OWNER_RING if kind in (None, "owner") else AGENT_RING


class History:
    """The write history of a data dir: two bounded rings, one per kind of session.

    The owner's records (the CLI, the owner's MCP agent) live in ``history.jsonl``,
    confined sessions' (``direct``, ``group``) in ``history-agents.jsonl``, each
    kept under ``max_bytes`` on its own: no number of peers writing, under any
    ids they choose, can push the owner's records out. Thread-safe (the index
    worker appends while socket threads list).
    """

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, agents_max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._rings = {OWNER_RING: Ring(path, max_bytes),
                       AGENT_RING: Ring(path.with_name(AGENTS_NAME), agents_max_bytes or max_bytes)}
        self._lock = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> History:
        return cls(data_dir / HISTORY_NAME)

    @property
    def paths(self) -> dict[str, Path]:
        return {name: ring.path for name, ring in self._rings.items()}

    def append(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Append one record (a line of JSON, fsynced) to its ring; trims that ring past its bound."""
        self.extend([rec])
        return rec

    def extend(self, recs: list[dict[str, Any]]) -> None:
        """Append several records, one write and one fsync per ring (an edit's records, written together:
        they share one session, so one ring, and land whole or not at all). Raises
        :class:`~memoryd.indexer.errors.DiskFullError` when the data dir has no room (nothing appended)."""
        with self._lock:
            grown = []
            for name, ring in self._rings.items():
                mine = [r for r in recs if ring_of(r) == name]
                if not mine:
                    continue
                try:
                    size = ring.append(*mine)
                except OSError as exc:
                    if is_disk_full(exc):
                        raise DiskFullError.of(exc, ring.path.parent, f"the write history ({ring.path.name})",
                                               "the records were not appended") from exc
                    raise
                if size > ring.max_bytes:
                    grown.append((ring, len(mine)))
            for ring, newest in grown:
                self._trim(ring, newest)

    def _trim(self, ring: Ring, newest: int) -> None:
        """Drop ``ring``'s oldest records (see :meth:`Ring.trim_plan`) — and with each undo dropped, the
        record it undid, in whichever ring that is: an undo and what it undid go together, so a trim
        never makes an undone record undoable again. A trim that fails (no room for its temp file)
        leaves both rings whole and over their bound until the next append."""
        try:
            keep, dropped = ring.trim_plan(newest)
            undone = set(_undone(dropped))
            for other in self._rings.values():
                lines = other.lines() if other is not ring and undone else []
                left = [raw for raw in lines if _id_of(raw) not in undone]
                if len(left) != len(lines):  # first the undone records, then their undos: never the reverse
                    other.rewrite(left)
            ring.rewrite(keep)
        except OSError as exc:
            log.warning("history.trim_failed", path=str(ring.path), error=str(exc),
                        action="kept whole, over its bound; trimmed at the next append")

    def heal(self) -> None:
        """At start (under the data-dir lock): cut torn tails, remove the temp files killed trims left."""
        with self._lock:
            for ring in self._rings.values():
                ring.heal()
                for tmp in remove_stale_temps(ring.path):
                    log.info("history.temp_removed", path=str(tmp), why="left by a trim that was killed")

    def purge(self, rid: str, now: datetime | None = None) -> dict[str, Any]:
        """Remove the texts of record ``rid`` for good (old, new, block, patch …): what stays says
        that an edit happened, where and when, and that it was purged; it can no longer be undone.
        The ring is rewritten through a temp file (the old bytes are not scrubbed from the disk's
        free blocks). Raises :class:`~memoryd.indexer.errors.EntryNotFound`."""
        with self._lock:
            for ring in self._rings.values():
                lines = ring.lines()
                for i, raw in enumerate(lines):
                    if _id_of(raw) != rid:
                        continue
                    old = parse_lines(raw)[0]
                    kept = {k: v for k, v in old.items() if k in _KEPT_ON_PURGE}
                    kept.update(purged=(now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"), redacted=True)
                    lines[i] = (json.dumps(kept, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
                    try:
                        ring.rewrite(lines)
                    except OSError as exc:
                        if is_disk_full(exc):
                            raise DiskFullError.of(exc, ring.path.parent, f"the write history ({ring.path.name})",
                                                   "nothing was purged") from exc
                        raise
                    return kept
        raise EntryNotFound(f"{rid[:40]!r}: no such history entry")

    def append_new(self, recs: list[dict[str, Any]]) -> None:
        """Append the records whose ids are not in the history yet (a recovered edit's, at most once)."""
        with self._lock:
            have = {r["id"] for ring in self._rings.values() for r in ring.records()}
            fresh = [r for r in recs if isinstance(r.get("id"), str) and r["id"] not in have]
        self.extend(fresh)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first (a torn or foreign line is skipped)."""
        with self._lock:
            merged = [r for ring in self._rings.values() for r in ring.records()]
        merged.sort(key=lambda r: str(r.get("time", "")))  # stable: each ring's own order is kept
        yield from merged

    def recent(self, path: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` records, newest first, for ``path`` (a file, or a folder and what is under it).

        Each record that was undone carries ``undone_by`` (the undo's id).
        """
        recs = list(self.records())
        undone = _undone(recs)
        out = []
        for r in reversed(recs):
            if path is not None and not _under(str(r.get("path", "")), path):
                continue
            out.append({**r, "undone_by": undone[r["id"]]} if r["id"] in undone else r)
            if len(out) >= limit:
                break
        return out

    def find(self, rid: str) -> dict[str, Any] | None:
        """The record with id ``rid`` (with ``undone_by`` if an undo reverted it), or None."""
        recs = list(self.records())
        found = next((r for r in recs if r["id"] == rid), None)
        if found is None:
            return None
        undone_by = _undone(recs).get(rid)
        return {**found, "undone_by": undone_by} if undone_by is not None else found

    def group(self, gid: str) -> list[dict[str, Any]]:
        """The records of one multi-file action (a ``clear``): those whose ``group`` is ``gid``, oldest first."""
        return [r for r in self.records() if r.get("group") == gid]

    def same_reinforcement(self, root: Path, path: str, old: str, new: str) -> str | None:
        """The id of a reinforcement of entry ``old`` in ``path`` by the same text ``new`` that is not undone:
        a repeat of it adds no record (the first one already undoes the absorption)."""
        recs = list(self.records())
        undone = _undone(recs)
        for r in reversed(recs):
            if (r.get("action") == REINFORCE and r.get("root") == str(root) and r.get("path") == path
                    and r.get("old") == old and r.get("new") == new and r["id"] not in undone):
                return str(r["id"])
        return None

    def sizes(self) -> dict[str, dict[str, int]]:
        """Each ring's bytes, bound and record count (for ``status``)."""
        out = {}
        with self._lock:
            for name, ring in self._rings.items():
                try:
                    size = ring.path.stat().st_size
                except FileNotFoundError:
                    size = 0
                out[name] = {"bytes": size, "max_bytes": ring.max_bytes, "records": len(ring.records())}
        return out


def _undone(recs: list[dict[str, Any]]) -> dict[str, str]:
    """id -> the undo that reverted it (an undo of a clear's file also covers that file's forget records)."""
    out: dict[str, str] = {}
    for r in recs:
        if r.get("action") == UNDO:
            for rid in [r.get("undoes"), *(r.get("covers") or ())]:
                if isinstance(rid, str):
                    out[rid] = str(r["id"])
    return out


_KEPT_ON_PURGE = frozenset({"id", "time", "action", "root", "path", "line", "lines", "session", "namespace",
                            "undoes", "covers", "group", "entries", "section", "undone_action", "exact", "score"})


def _id_of(raw: bytes) -> str | None:
    recs = parse_lines(raw)
    return str(recs[0]["id"]) if recs else None


def _under(path: str, want: str) -> bool:
    want = want.strip("/")
    return not want or path == want or path.startswith(want + "/")
