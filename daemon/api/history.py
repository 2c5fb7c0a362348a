"""The history socket methods: ``history`` (list what writes replaced, removed or absorbed) and ``undo``.

Both are owner-only: the history holds the text of entries from every
namespace, and an undo rewrites a file. A confined session (``direct``,
``group``) gets ``ACCESS_DENIED`` (-32020), as for ``audit``.

* ``history {"path"?: str, "limit"?: int, "session"?}`` →
  ``{"entries": [{id, time, action, root, path, line, old, new, session, …}], "path": <history file>}``,
  newest first; ``path`` keeps the records of one file or of a folder's files (then the answer also says
  ``path_exists``: whether it names a file or folder under a root, and ``roots``). Texts are redacted
  here (:func:`shown`); the records on disk keep the exact bytes so that every undo works.
* ``undo {"id": str, "session"?}`` → the restore's outcome
  (``{"decision": "restored", "path", "line", "history_id", …}``). Runs like a
  write (rate limits, ``write.enabled``, the index worker, one audit record).
  An unknown id is ``ENTRY_NOT_FOUND`` (-32028); an id already undone, or an
  undo, is ``WRITE_CONFLICT`` (-32025) with nothing changed.
* ``purge {"id": str, "session"?}`` → ``{"decision": "purged", "id", "entry"}``: the record's texts
  (old, new, block, patch) are removed from the history file for good — a forgotten secret —
  and the record stays as a marker (it can no longer be undone). Runs like ``undo``, audited.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from memoryd.daemon.api.requests import parse_history, parse_undo
from memoryd.daemon.api.session import owner_only
from memoryd.daemon.api.vocabulary import HistoryReply, PurgeReply, WriteReply
from memoryd.daemon.api.write import WriteMethods, answer_of
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.indexer.redaction.privacy import redact
from memoryd.indexer.write.history import History


class HistoryMethods:
    """``history`` reads the write history; ``undo`` runs like a write, through ``writes``."""

    def __init__(self, *, writes: WriteMethods, history: History, roots: Callable[[], RootMap]) -> None:
        self._writes = writes
        self.store = history
        self._roots = roots

    def handlers(self) -> dict[str, Handler]:
        return {"history": self.history, "undo": self.undo, "purge": self.purge}

    def history(self, params: dict[str, Any], peer: Peer) -> HistoryReply:
        req = parse_history(params, peer)
        owner_only(req.session, "history")
        path = req.path
        roots = self._roots()
        if path is not None and os.path.isabs(path):
            loc = roots.locate(path)
            path = loc[1] if loc is not None else path
        entries = [shown(r) for r in self.store.recent(path, req.limit)]
        out: HistoryReply = {"entries": entries, "path": str(self.store.path)}
        if req.path is not None:  # an empty list alone cannot tell "no history" from a typo'd path
            out["path_exists"] = _names_something(roots, req.path)
            out["roots"] = [str(r) for r in roots.roots]
        return out

    def undo(self, params: dict[str, Any], peer: Peer) -> WriteReply:
        req = parse_undo(params, peer)
        rec: dict[str, Any] = {"action": "undo", "uid": peer.uid, "pid": peer.pid, "reason": f"undo {req.id}"}
        with self._writes.audited(rec):
            session = req.claim.resolve()
            rec["session"] = session.describe()
            owner_only(session, "undo")
            session = self._writes.admit(req.claim, rec)
            writer = self._writes.new_writer()
            outcome = self._writes.on_worker(lambda: writer.undo(req.id, session.describe()))
            rec.update(decision=outcome.decision, path=outcome.path, line=outcome.line, reason=outcome.reason)
            return answer_of(outcome)

    def purge(self, params: dict[str, Any], peer: Peer) -> PurgeReply:
        """Remove one record's texts from the history for good (a forgotten secret), audited like a write."""
        req = parse_undo(params, peer)  # the same params: ``id`` and ``session``
        rec: dict[str, Any] = {"action": "purge", "uid": peer.uid, "pid": peer.pid, "reason": f"purge {req.id}"}
        with self._writes.audited(rec):
            session = req.claim.resolve()
            rec["session"] = session.describe()
            owner_only(session, "purge")
            self._writes.admit(req.claim, rec)
            kept = self._writes.on_worker(lambda: self.store.purge(req.id))
            rec.update(decision="purged", path=kept.get("path"), line=kept.get("line"))
            return {"decision": "purged", "id": req.id, "entry": shown(kept)}


def _names_something(roots: RootMap, path: str) -> bool:
    """Whether ``path`` (absolute, or relative to a root) is a file or folder inside one of the roots."""
    if ".." in path.replace("\\", "/").split("/"):
        return False  # never a probe of what lies outside the roots
    if os.path.isabs(path):
        return roots.locate(path) is not None and os.path.lexists(path)
    return any(os.path.lexists(os.path.join(root, path)) for root in roots.roots)


_TEXTS = ("old", "new", "reason")
_LINES = ("block", "new_block")


def shown(rec: dict[str, Any]) -> dict[str, Any]:
    """A history record as it leaves the daemon: its texts redacted (the record on disk keeps the exact
    bytes, for undo), its patch summarised as the number of lines it would bring back."""
    out = {k: v for k, v in rec.items() if k != "patch"}
    for k in _TEXTS:
        if isinstance(out.get(k), str):
            out[k] = redact(out[k])
    for k in _LINES:
        if isinstance(out.get(k), list):
            out[k] = [redact(x) if isinstance(x, str) else x for x in out[k]]
    patch = rec.get("patch")
    if isinstance(patch, dict) and isinstance(patch.get("hunks"), list):
        out["restorable_lines"] = sum(len(h.get("old") or ()) for h in patch["hunks"] if isinstance(h, dict))
    return out
