"""The read audit: who read what, for every read method (seed 003: read → audit log).

Writes have been audited since the start (:mod:`memoryd.daemon.api.audit`); reads go
to their own log, ``audit-reads.jsonl`` in the data dir — an agent's ``context``
on every prompt must not rotate the history of writes away — with the same
bounds (``write.audit_max_bytes`` per file, ``write.audit_backups`` files), mode
0600, the same scrubbing of every value, and the same aggregation of refusals.

A record names who (uid, the session as asked), the method, what it asked for
(namespace or path prefix, the path of a ``get``), and what came back: the
number of hits, entries or lines and the distinct paths of the hits (at most
:data:`MAX_PATHS`). Never the query text and never any content.

The wrapping is done once, where the handlers are assembled
(:func:`audit_reads`), so a read method added later is audited by its row in
:mod:`memoryd.daemon.api.vocabulary` saying ``audit="read"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.daemon.api.audit import AuditLog
from memoryd.daemon.api.vocabulary import READ_AUDITED
from memoryd.daemon.rpc.errors import RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.indexer.config import WriteConfig

READS_NAME = "audit-reads.jsonl"
MAX_PATHS = 10


def open_read_audit(cfg: WriteConfig, data_dir: Path) -> AuditLog:
    log = AuditLog(data_dir / READS_NAME, cfg.audit_max_bytes, cfg.audit_backups)
    log.recover()
    return log


def audit_reads(handlers: dict[str, Handler], log: AuditLog) -> dict[str, Handler]:
    """``handlers`` with each read-audited method (the vocabulary's ``READ_AUDITED``) recording one
    read-audit line per call."""
    return {name: (_audited(name, h, log) if name in READ_AUDITED else h) for name, h in handlers.items()}


def _audited(method: str, handler: Handler, log: AuditLog) -> Handler:
    def run(params: dict[str, Any], peer: Peer) -> Any:
        rec: dict[str, Any] = {"uid": peer.uid, "pid": peer.pid, "action": method, **_asked(params)}
        try:
            result = handler(params, peer)
        except RpcError as exc:
            rec.update(decision="denied", reason=exc.message, code=exc.code)
            log.record(**rec)
            raise
        except Exception as exc:
            rec.update(decision="error", reason=type(exc).__name__)
            log.record(**rec)
            raise
        log.record(**rec, decision="read", **_returned(result))
        return result

    return run


def _asked(params: dict[str, Any]) -> dict[str, Any]:
    """Who and where, from the request: never ``query`` or ``content``."""
    out: dict[str, Any] = {}
    session = params.get("session")
    out["session"] = session if isinstance(session, dict) else {"kind": "owner"}
    for key in ("namespace", "path_prefix", "path"):
        value = params.get(key)
        if isinstance(value, str):
            out["namespace" if key != "path" else "path"] = value[:512]
            break
    return out


def _returned(result: Any) -> dict[str, Any]:
    """How much came back, and from which files."""
    if not isinstance(result, dict):
        return {}
    for key in ("hits", "sources", "entries", "files", "namespaces"):
        items = result.get(key)
        if isinstance(items, list):
            paths = sorted({str(i["path"]) for i in items if isinstance(i, dict) and isinstance(i.get("path"), str)})
            return {"hits": len(items), **({"paths": paths[:MAX_PATHS]} if paths else {})}
    if isinstance(result.get("count"), int):
        return {"hits": result["count"]}
    if isinstance(result.get("start_line"), int) and isinstance(result.get("end_line"), int):
        return {"hits": max(0, result["end_line"] - result["start_line"] + 1)}
    return {}
