"""The history socket methods: ``history`` (list what writes replaced, removed or absorbed) and ``undo``.

Both are owner-only: the history holds the text of entries from every
namespace, and an undo rewrites a file. A confined session (``direct``,
``group``) gets ``ACCESS_DENIED`` (-32020), as for ``audit``.

* ``history {"path"?: str, "limit"?: int, "session"?}`` →
  ``{"entries": [{id, time, action, root, path, line, old, new, session, …}], "path": <history file>}``,
  newest first; ``path`` keeps the records of one file or of a folder's files.
* ``undo {"id": str, "session"?}`` → the restore's outcome
  (``{"decision": "restored", "path", "line", "history_id", …}``). Runs like a
  write (rate limits, ``write.enabled``, the index worker, one audit record).
  An unknown id is ``ENTRY_NOT_FOUND`` (-32028); an id already undone, or an
  undo, is ``WRITE_CONFLICT`` (-32025) with nothing changed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from memoryd.daemon.api.audit import Audited
from memoryd.daemon.api.write import _ERRORS, ACCESS_DENIED, WriteService, session_for
from memoryd.daemon.rpc.jsonrpc import Handler, InvalidParams, Peer, RpcError, param, reject_unknown
from memoryd.indexer.write.access import OWNER, Session
from memoryd.indexer.write.history import History

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

MAX_LIMIT = 1000
_ID_MAX = 64


def history_of(d: Daemon) -> History:
    """The daemon's write history (``history.jsonl`` in its data dir)."""
    return History.in_data_dir(d.cfg.data_dir)


def build_history_handlers(d: Daemon, svc: WriteService) -> dict[str, Handler]:
    h = HistoryMethods(d, svc)
    return {"history": h.history, "undo": h.undo}


def _owner_only(session: Session, what: str) -> None:
    if session.kind != OWNER:
        raise RpcError(ACCESS_DENIED, f"{what} is for the owner only; a {session.kind} session may not use it")


class HistoryMethods:
    def __init__(self, d: Daemon, svc: WriteService) -> None:
        self.d = d
        self.svc = svc
        self.store = history_of(d)

    def history(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, {"path", "limit", "session"})
        path = param(params, "path", str, None)
        limit = param(params, "limit", int, 50)
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidParams(f"param 'limit' must be in 1..{MAX_LIMIT}, got {limit}")
        if path is not None and ("\x00" in path or len(path) > 4096):
            raise InvalidParams("param 'path' must be a path without NUL, at most 4096 characters")
        _owner_only(session_for(params, peer), "history")
        if path is not None and os.path.isabs(path):
            loc = self.d.roots.locate(path)
            path = loc[1] if loc is not None else path
        return {"entries": self.store.recent(path, limit), "path": str(self.store.path)}

    def undo(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, {"id", "session"})
        rid = param(params, "id", str)
        if not rid or len(rid) > _ID_MAX:
            raise InvalidParams(f"param 'id' must be a history id (1..{_ID_MAX} characters)")
        rec: dict[str, Any] = {"action": "undo", "uid": peer.uid, "pid": peer.pid, "reason": f"undo {rid}"}
        with Audited(self.svc.audit_log, rec, _ERRORS):
            session = session_for(params, peer)
            rec["session"] = session.describe()
            _owner_only(session, "undo")
            session = self.svc._admit(params, peer, rec)
            writer = self.svc._writer_factory()
            outcome = self.svc._on_worker(lambda: writer.undo(rid, session.describe()))
            rec.update(decision=outcome.decision, path=outcome.path, line=outcome.line, reason=outcome.reason)
            result: dict[str, Any] = outcome.to_dict()
            return result
