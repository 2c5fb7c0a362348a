"""The write socket methods: ``remember``, ``forget`` and ``audit`` (DESIGN.md, "Socket protocol").

Each request goes: validate params → session (seed 003) → rate limits → size
limit → permission matrix → [``remember``: quality gate → privacy filter →
router, all on the connection thread] → the file edit and its re-index on the
index worker thread (so writes never race indexing) → one audit record.

Application error codes (JSON-RPC, -32000..-32099); ``data`` names the limit or rule:

======  ===================  ==================================================
code    name                 when
======  ===================  ==================================================
-32020  ACCESS_DENIED        the session may not do this (owner claim from another uid too)
-32021  TURN_LIMIT           more than ``write.max_per_turn`` writes with one ``turn`` id
-32022  MINUTE_LIMIT         more than ``write.max_per_minute`` writes in 60 s
-32023  CONTENT_TOO_LARGE    content over ``write.max_content_bytes`` (UTF-8 bytes)
-32024  BAD_TARGET           path/namespace refused (``..``, absolute, symlink, not .md, not UTF-8)
-32025  WRITE_CONFLICT       the file kept changing, or its block markers are broken
-32026  WRITE_TIMEOUT        the index worker stayed busy for ``write.wait_s``; nothing written
-32027  WRITE_DISABLED       ``write.enabled = false``
-32028  ENTRY_NOT_FOUND      ``forget``: no memory entry on that line
======  ===================  ==================================================

A ``remember`` refused by the quality gate or the privacy filter is not an
error: it answers ``{"decision": "rejected", "reason", "rule", "stage"}``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import date
from typing import TYPE_CHECKING, Any

from memoryd.daemon.api.audit import Audited, AuditLog
from memoryd.daemon.api.limits import RateLimited, WriteLimiter
from memoryd.daemon.rpc.jsonrpc import SHUTTING_DOWN, Handler, InvalidParams, Peer, RpcError, param, reject_unknown
from memoryd.indexer.pathguard import normalize
from memoryd.indexer.write import privacy
from memoryd.indexer.write.access import (
    AUDIT,
    FORGET,
    REMEMBER,
    Session,
    authorize,
    namespace_of,
    parse_namespace,
    parse_session,
)
from memoryd.indexer.write.errors import (
    AccessDenied,
    BadTarget,
    EntryNotFound,
    SessionError,
    UnknownType,
    WriteConflict,
    WriteError,
)
from memoryd.indexer.write.history import History
from memoryd.indexer.write.pipeline import Rejected, prepare
from memoryd.indexer.write.router import TYPES
from memoryd.indexer.write.writer import MemoryWriter

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

ACCESS_DENIED = -32020
TURN_LIMIT = -32021
MINUTE_LIMIT = -32022
CONTENT_TOO_LARGE = -32023
BAD_TARGET = -32024
WRITE_CONFLICT = -32025
WRITE_TIMEOUT = -32026
WRITE_DISABLED = -32027
ENTRY_NOT_FOUND = -32028
_CODES: dict[type[WriteError], int] = {AccessDenied: ACCESS_DENIED, BadTarget: BAD_TARGET,
                                       WriteConflict: WRITE_CONFLICT, EntryNotFound: ENTRY_NOT_FOUND}
_ERRORS = frozenset({WRITE_CONFLICT, WRITE_TIMEOUT, SHUTTING_DOWN})  # audited as "error", not "denied"
AUDIT_NAME = "audit.jsonl"
MAX_AUDIT_TAIL = 10_000


def build_write_handlers(d: Daemon) -> dict[str, Handler]:
    from memoryd.daemon.api.history import build_history_handlers  # it builds on this module

    svc = WriteService(d)
    d.on_shutdown.append(svc.audit_log.flush)  # refusals counted but not yet summarised (memoryd.daemon.api.audit)
    return {"remember": svc.remember, "forget": svc.forget, "audit": svc.audit} | build_history_handlers(d, svc)


def session_for(params: dict[str, Any], peer: Peer) -> Session:
    """The request's session (``params["session"]``; absent = owner for the daemon's own uid).

    For the read methods too. Raises ``InvalidParams`` (malformed) or ``RpcError(ACCESS_DENIED)``.
    """
    try:
        return parse_session(params.get("session"), owner_allowed=peer.uid == os.getuid())
    except SessionError as exc:
        raise InvalidParams(str(exc)) from None
    except AccessDenied as exc:
        raise RpcError(ACCESS_DENIED, str(exc)) from None


class WriteService:
    """State shared by the write methods: the limiter and the audit log. Thread-safe."""

    def __init__(self, d: Daemon, writer_factory: Callable[[], MemoryWriter] | None = None) -> None:
        self.d = d
        w = d.cfg.write
        self.limiter = WriteLimiter(w.max_per_turn, w.max_per_minute)
        self.audit_log = AuditLog(d.cfg.data_dir / AUDIT_NAME, w.audit_max_bytes, w.audit_backups)
        self._writer_factory = writer_factory or self._writer

    def _writer(self) -> MemoryWriter:
        return MemoryWriter(self.d.index, self.d.roots.roots[0], self.d.cfg.write,
                            history=History.in_data_dir(self.d.cfg.data_dir))

    # -- methods ------------------------------------------------------------------

    def remember(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, {"content", "type", "namespace", "session"})
        content = param(params, "content", str)
        mtype = param(params, "type", str, None)
        ns_raw = param(params, "namespace", str, None)
        if mtype is not None and mtype not in TYPES:
            raise InvalidParams(f"param 'type' must be one of {list(TYPES)}, got {mtype[:40]!r}")
        rec: dict[str, Any] = {"action": "remember", "uid": peer.uid, "pid": peer.pid,
                               "bytes": len(content.encode("utf-8", "surrogatepass"))}
        with Audited(self.audit_log, rec, _ERRORS):
            session = self._admit(params, peer, rec)
            self._check_size(rec["bytes"])
            ns = _write_error(lambda: parse_namespace(ns_raw, session))
            rec["namespace"] = str(ns)
            _write_error(lambda: authorize(session, REMEMBER, ns))
            plan = _write_error(lambda: prepare(content, ns, date.today(), mtype))
            if isinstance(plan, Rejected):
                rec.update(decision="rejected", reason=plan.reason, rule=plan.rule)
                self._log_rejection(plan, content)
                return {"decision": "rejected", "reason": plan.reason, "rule": plan.rule, "stage": plan.stage}
            rec["path"] = plan.target
            outcome = self._on_worker(lambda: self._writer_factory().remember(plan, session.describe()))
            rec.update(decision=outcome.decision, path=outcome.path, line=outcome.line, reason=outcome.reason)
            return {**outcome.to_dict(), **plan.describe()}

    def forget(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, {"path", "line", "text", "session"})
        raw = param(params, "path", str)
        line = param(params, "line", int)
        expect = param(params, "text", str, None)
        if line < 1:
            raise InvalidParams(f"param 'line' must be >= 1, got {line}")
        rec: dict[str, Any] = {"action": "forget", "uid": peer.uid, "pid": peer.pid, "line": line}
        with Audited(self.audit_log, rec, _ERRORS):
            session = self._admit(params, peer, rec)
            rel = self._relative(raw)
            rec.update(path=rel, namespace=str(namespace_of(rel)))
            _write_error(lambda: authorize(session, FORGET, namespace_of(rel)))
            outcome = self._on_worker(lambda: self._writer_factory().forget(rel, line, expect, session.describe()))
            rec.update(decision=outcome.decision, reason=outcome.reason)
            return outcome.to_dict()

    def audit(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, {"tail", "session"})
        n = param(params, "tail", int, 20)
        if not 1 <= n <= MAX_AUDIT_TAIL:
            raise InvalidParams(f"param 'tail' must be in 1..{MAX_AUDIT_TAIL}, got {n}")
        session = session_for(params, peer)
        _write_error(lambda: authorize(session, AUDIT))
        return {"entries": self.audit_log.tail(n), "path": str(self.audit_log.path)}

    # -- steps --------------------------------------------------------------------

    def _admit(self, params: dict[str, Any], peer: Peer, rec: dict[str, Any]) -> Session:
        """Session, then the enabled switch and the rate limits (this attempt is counted)."""
        session = session_for(params, peer)
        rec["session"] = session.describe()
        if not self.d.cfg.write.enabled:
            raise RpcError(WRITE_DISABLED, "writes are disabled (write.enabled = false)")
        try:
            self.limiter.admit(session.key, session.turn)
        except RateLimited as exc:
            code = TURN_LIMIT if exc.limit == "write.max_per_turn" else MINUTE_LIMIT
            data = {"limit": exc.limit, "max": exc.maximum}
            if exc.retry_after_s is not None:
                data["retry_after_s"] = exc.retry_after_s
            raise RpcError(code, str(exc), data) from None
        return session

    def _check_size(self, nbytes: int) -> None:
        limit = self.d.cfg.write.max_content_bytes
        if nbytes > limit:
            raise RpcError(CONTENT_TOO_LARGE, f"content is {nbytes} bytes; the limit is {limit} "
                           "(write.max_content_bytes)", {"limit": "write.max_content_bytes", "max": limit})

    def _relative(self, raw: str) -> str:
        """A forget path: relative to the first root, or absolute inside it (through the path resolver;
        the writer's :func:`~memoryd.indexer.write.access.resolve_target` then refuses links)."""
        norm = _write_error(lambda: normalize(raw))
        if not os.path.isabs(raw):
            return raw
        loc = self.d.roots.guard.locate_absolute(norm)
        if loc is None or loc[0] != self.d.roots.roots[0]:
            raise RpcError(BAD_TARGET, f"{raw[:200]}: not inside the first memory root (where memories are written)")
        return loc[1]

    def _on_worker(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the index worker; if it never started within ``write.wait_s``, cancel it."""
        state = ["queued"]
        lock = threading.Lock()

        def run() -> tuple[bool, Any]:
            with lock:
                if state[0] == "cancelled":
                    return False, None
                state[0] = "running"
            try:
                return True, fn()
            except Exception as exc:  # re-raised on the connection thread, with its type
                return False, exc

        task = self.d.worker.call(run)
        assert task.done is not None
        wait_s = self.d.cfg.write.wait_s
        if not task.done.wait(wait_s):
            with lock:
                if state[0] == "queued":
                    state[0] = "cancelled"
                    raise RpcError(WRITE_TIMEOUT, f"the index worker stayed busy for {wait_s:g} s (write.wait_s); "
                                   "nothing was written, try again")
            if not task.done.wait(wait_s):
                raise RpcError(WRITE_TIMEOUT, f"the write is still running after {2 * wait_s:g} s; it will finish "
                               "in the background")
        task.raise_if_cancelled()
        if "error" in task.result:
            raise RpcError(WRITE_CONFLICT, f"write failed on the index worker: {task.result['error']}")
        ok, value = task.result.get("value", (False, None))
        if not ok:
            if isinstance(value, BaseException):
                raise _write_error_of(value) from None
            raise RpcError(WRITE_TIMEOUT, "the write was cancelled; nothing was written")
        return value

    def _log_rejection(self, plan: Rejected, content: str) -> None:
        preview = privacy.redact_for_log(content)
        if not privacy.check(preview).passed:  # redaction did not cover it: say nothing at all
            preview = "[withheld]"
        self.d.log.info("write.rejected", stage=plan.stage, rule=plan.rule, preview=preview)


def _write_error(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (WriteError, UnknownType) as exc:
        raise _write_error_of(exc) from None


def _write_error_of(exc: BaseException) -> BaseException:
    if isinstance(exc, UnknownType):
        return InvalidParams(str(exc))
    if isinstance(exc, SessionError):
        return InvalidParams(str(exc))
    for cls, code in _CODES.items():
        if isinstance(exc, cls):
            return RpcError(code, str(exc))
    return exc
