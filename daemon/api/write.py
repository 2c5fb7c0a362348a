"""The write socket methods: ``remember``, ``forget`` and ``audit`` (README, "Writing memories").

Each request goes: parse params (:mod:`memoryd.daemon.api.requests`) → session →
rate limits → size limit → permission matrix → [``remember``: quality gate →
privacy filter → router, all on the connection thread] → the file edit and its
re-index on the index worker thread (so writes never race indexing) → one audit
record. The error codes (-32020..-32028) are in :mod:`memoryd.daemon.rpc.errors`.

Rate limits hold agents only (:func:`~memoryd.daemon.api.session.held_to_limits`)
and count only writes that changed something: :meth:`WriteMethods.admit` reserves
a place, and the request's :meth:`WriteMethods.audited` block keeps it or gives
it back by the decision it records (:data:`NOT_COUNTED`, or any error).

A ``remember`` refused by the quality gate or the privacy filter is not an
error: it answers ``{"decision": "rejected", "reason", "rule", "stage"}``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import structlog

from memoryd.daemon.api.audit import Audited, AuditLog
from memoryd.daemon.api.limits import TURN_LIMIT_KEY, RateLimited, Ticket, WriteLimiter
from memoryd.daemon.api.ports import Sited, WorkQueue, worker_result
from memoryd.daemon.api.requests import parse_audit, parse_forget, parse_remember
from memoryd.daemon.api.session import SessionClaim, held_to_limits
from memoryd.daemon.api.vocabulary import AuditReply, UserPromptParams, UserPromptReply, WriteReply, param_names
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import (
    ACCESS_DENIED,
    BAD_TARGET,
    CONTENT_TOO_LARGE,
    DISK_FULL,
    ENTRY_NOT_FOUND,
    MINUTE_LIMIT,
    SHUTTING_DOWN,
    TURN_LIMIT,
    WRITE_CONFLICT,
    WRITE_DISABLED,
    WRITE_TIMEOUT,
    InvalidParams,
    RpcError,
)
from memoryd.daemon.rpc.jsonrpc import Handler, Peer, reject_unknown
from memoryd.indexer.access import AUDIT, FORGET, REMEMBER, Session, authorize, namespace_of, parse_namespace
from memoryd.indexer.config import WriteConfig
from memoryd.indexer.errors import (
    AccessDenied,
    BadTarget,
    DiskFullError,
    EntryNotFound,
    SessionError,
    UnknownType,
    WriteConflict,
    WriteError,
)
from memoryd.indexer.pathguard import normalize
from memoryd.indexer.redaction import privacy
from memoryd.indexer.storage.site import foreign_site
from memoryd.indexer.write.intake import Rejected, has_bank, prepare

if TYPE_CHECKING:  # the writer (dedup's candidates, the embedding cache) brings numpy
    from memoryd.indexer.write.writer import MemoryWriter, Outcome

T = TypeVar("T")

_CODES: dict[type[WriteError], int] = {AccessDenied: ACCESS_DENIED, BadTarget: BAD_TARGET,
                                       WriteConflict: WRITE_CONFLICT, EntryNotFound: ENTRY_NOT_FOUND}
#: Audited as "error", not "denied".
AUDITED_AS_ERROR = frozenset({WRITE_CONFLICT, WRITE_TIMEOUT, SHUTTING_DOWN, DISK_FULL})
AUDIT_NAME = "audit.jsonl"
#: Audit decisions of a write that changed nothing: they give their rate-limit place back.
NOT_COUNTED = frozenset({"rejected", "unchanged", "dry_run"})

log = structlog.get_logger("memoryd")


def open_audit_log(cfg: WriteConfig, data_dir: Path) -> AuditLog:
    """The daemon's one audit log (``audit.jsonl`` in its data dir), with a killed run's pending counts written."""
    audit_log = AuditLog(data_dir / AUDIT_NAME, cfg.audit_max_bytes, cfg.audit_backups)
    audit_log.recover()
    return audit_log


class WriteMethods:
    """The write methods and what they share: the rate limiter and the audit log. Thread-safe.

    ``new_writer`` makes the :class:`MemoryWriter` a write runs with (on the worker thread); ``index``
    says which site this daemon is, for a ``forget`` that names a hit's ``site``.
    """

    def __init__(
        self, *, worker: WorkQueue, roots: Callable[[], RootMap], cfg: WriteConfig, audit_log: AuditLog,
        new_writer: Callable[[], MemoryWriter], index: Sited,
    ) -> None:
        self._worker = worker
        self._index = index
        self._roots = roots
        self._cfg = cfg
        self.limiter = WriteLimiter(cfg.max_per_turn, cfg.max_per_minute)
        self.audit_log = audit_log
        self.read_audit_log: AuditLog | None = None  # the read audit (read_audit.py), set by whoever assembles
        self.new_writer = new_writer
        self._open: dict[int, list[Ticket]] = {}  # id(rec) of each audited block → its reserved places
        self._open_lock = threading.Lock()

    def handlers(self) -> dict[str, Handler]:
        return {"remember": self.remember, "forget": self.forget, "audit": self.audit,
                "user_prompt": self.user_prompt}

    # -- methods ------------------------------------------------------------------

    def remember(self, params: dict[str, Any], peer: Peer) -> WriteReply:
        req = parse_remember(params, peer)
        content = req.content
        rec: dict[str, Any] = {"action": "remember", "uid": peer.uid, "pid": peer.pid,
                               "bytes": len(content.encode("utf-8", "surrogatepass"))}
        with self.audited(rec):
            session = self.admit(req.claim, rec)
            self.check_size(rec["bytes"])
            ns = _write_error(lambda: parse_namespace(req.namespace, session))
            rec["namespace"] = str(ns)
            _write_error(lambda: authorize(session, REMEMBER, ns))
            bank = has_bank(self._roots().roots[0])
            plan = _write_error(lambda: prepare(content, ns, date.today(), req.type, bank=bank))
            if isinstance(plan, Rejected):
                rec.update(decision="rejected", reason=plan.reason, rule=plan.rule)
                self._log_rejection(plan, content)
                return {"decision": "rejected", "reason": plan.reason, "rule": plan.rule, "stage": plan.stage}
            rec["path"] = plan.target
            outcome = self.on_worker(lambda: self.new_writer().remember(plan, session.describe(),
                                                                         explain=req.explain))
            rec.update(decision=outcome.decision, path=outcome.path, line=outcome.line, reason=outcome.reason)
            return cast(WriteReply, {**answer_of(outcome), **plan.describe()})  # the route: type, section …

    def forget(self, params: dict[str, Any], peer: Peer) -> WriteReply:
        req = parse_forget(params, peer)
        refusal = foreign_site(req.site, self._index.site) if req.site else None
        if refusal is not None:
            raise InvalidParams(refusal)
        rec: dict[str, Any] = {"action": "forget", "uid": peer.uid, "pid": peer.pid, "line": req.line}
        with self.audited(rec):
            session = self.admit(req.claim, rec)
            rel = self.relative_target(req.path)
            rec.update(path=rel, namespace=str(namespace_of(rel)))
            _write_error(lambda: authorize(session, FORGET, namespace_of(rel)))
            outcome = self.on_worker(lambda: self.new_writer().forget(rel, req.line, req.text, session.describe()))
            rec.update(decision=outcome.decision, reason=outcome.reason)
            return answer_of(outcome)

    def audit(self, params: dict[str, Any], peer: Peer) -> AuditReply:
        req = parse_audit(params, peer)
        _write_error(lambda: authorize(req.session, AUDIT))
        log = self.read_audit_log if req.log == "reads" and self.read_audit_log is not None else self.audit_log
        return {"entries": log.tail(req.tail), "path": str(log.path), "log": req.log}

    def user_prompt(self, params: dict[str, Any], peer: Peer) -> UserPromptReply:
        """A host's prompt hook (``memoryd context --user-prompt``): a person sent a new prompt, so
        every agent's write turn ends now rather than after its MCP server's silence. Only a person's
        own session may say so: an agent (a confined session, or one with a turn) would otherwise
        hand itself a fresh allowance."""
        reject_unknown(params, param_names(UserPromptParams))
        session = SessionClaim.of(params, peer).resolve()
        if held_to_limits(session):
            raise RpcError(ACCESS_DENIED, f"user_prompt: only the owner's own commands (the host's prompt hook) "
                                          f"may end agent turns, not a {session.kind} session"
                                          + (" with a turn" if session.turn is not None else ""))
        ended = self.limiter.user_prompt()
        log.info("write.turns_ended", why="user prompt", turns=ended)
        return {"turns_ended": ended}

    # -- steps --------------------------------------------------------------------

    @contextmanager
    def audited(self, rec: dict[str, Any]) -> Iterator[None]:
        """One write request: its audit record (:class:`Audited`), and the rate-limit places
        :meth:`admit` reserved inside it, kept if the write changed something and given back if
        it raised or recorded a decision in :data:`NOT_COUNTED`."""
        key = id(rec)
        tickets: list[Ticket] = []
        with self._open_lock:
            self._open[key] = tickets
        changed = False
        try:
            with Audited(self.audit_log, rec, AUDITED_AS_ERROR):
                yield
            changed = rec.get("decision") not in NOT_COUNTED
        finally:
            with self._open_lock:
                del self._open[key]
            for ticket in tickets:
                if changed:
                    ticket.charge()
                else:
                    ticket.release()

    def admit(self, claim: SessionClaim, rec: dict[str, Any]) -> Session:
        """Session, then the enabled switch and, for an agent, the rate limits.

        The place taken is settled by the enclosing :meth:`audited` block; called outside one,
        the write is counted at once.
        """
        session = claim.resolve()
        rec["session"] = session.describe()
        if not self._cfg.enabled:
            raise RpcError(WRITE_DISABLED, "writes are disabled (write.enabled = false)")
        if not held_to_limits(session):
            return session
        try:
            ticket = self.limiter.reserve(session.key, session.turn)
        except RateLimited as exc:
            raise _limit_error(exc) from None
        with self._open_lock:
            pending = self._open.get(id(rec))
            if pending is not None:
                pending.append(ticket)
        if pending is None:
            ticket.charge()
        return session

    def check_size(self, nbytes: int) -> None:
        """Refuse content over ``write.max_content_bytes`` (every write method, this class's and
        :mod:`memoryd.daemon.api.manage`'s, applies the same limit)."""
        limit = self._cfg.max_content_bytes
        if nbytes > limit:
            raise RpcError(CONTENT_TOO_LARGE, f"content is {nbytes} bytes; the limit is {limit} "
                           "(write.max_content_bytes)", {"limit": "write.max_content_bytes", "max": limit})

    def relative_target(self, raw: str) -> str:
        """A target path (forget, update_section, promote): relative to the first root, or absolute
        inside it (through the path resolver; the writer's
        :func:`~memoryd.indexer.access.resolve_target` then refuses links)."""
        norm = _write_error(lambda: normalize(raw))
        if not os.path.isabs(raw):
            return raw
        roots = self._roots()
        loc = roots.guard.locate_absolute(norm)
        if loc is None or loc[0] != roots.roots[0]:
            raise RpcError(BAD_TARGET, f"{raw[:200]}: not inside the first memory root (where memories are written)")
        return loc[1]

    def on_worker(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the index worker; if it has not started within ``write.wait_s``, cancel it.

        ``fn``'s own errors come back on this thread with their type (the worker does not log
        them: a refused write is the caller's answer, not a worker failure).
        """
        task = self._worker.call(lambda: _captured(fn))
        wait_s = self._cfg.wait_s
        try:
            ok, value = worker_result(task, wait_s)
        except TimeoutError:
            if task.cancel():  # still queued: it will never run
                raise RpcError(WRITE_TIMEOUT, f"the index worker stayed busy for {wait_s:g} s (write.wait_s); "
                               "nothing was written, try again") from None
            try:
                ok, value = worker_result(task, wait_s)
            except TimeoutError:
                raise RpcError(WRITE_TIMEOUT, f"the write is still running after {2 * wait_s:g} s; it will "
                               "finish in the background") from None
        if not ok:
            assert isinstance(value, BaseException)
            raise _write_error_of(value) from None
        return cast(T, value)  # ok: what fn returned

    def _log_rejection(self, plan: Rejected, content: str) -> None:
        preview = privacy.redact_for_log(content)
        if not privacy.check(preview).passed:  # redaction did not cover it: say nothing at all
            preview = "[withheld]"
        log.info("write.rejected", stage=plan.stage, rule=plan.rule, preview=preview)


def answer_of(outcome: Outcome) -> WriteReply:
    """A write's answer: the entry it replaced or removed (``previous``) passes the secret redactor that
    the history listing uses (the history file keeps the exact bytes, for undo and ``purge``)."""
    out = cast(WriteReply, outcome.to_dict())  # Outcome's fields, the unset ones left out
    previous = out.get("previous")
    if isinstance(previous, str):
        out["previous"] = privacy.redact(previous)
    return out


def _limit_error(exc: RateLimited) -> RpcError:
    """-32021 / -32022, ``data`` = ``{limit, max, retry_after_s?}`` (see :mod:`memoryd.daemon.rpc.errors`)."""
    code = TURN_LIMIT if exc.limit == TURN_LIMIT_KEY else MINUTE_LIMIT
    data: dict[str, Any] = {"limit": exc.limit, "max": exc.maximum}
    if exc.retry_after_s is not None:
        data["retry_after_s"] = exc.retry_after_s
    return RpcError(code, str(exc), data)


def _captured(fn: Callable[[], T]) -> tuple[bool, T | BaseException]:
    try:
        return True, fn()
    except Exception as exc:  # re-raised on the connection thread, with its type
        return False, exc


def _write_error(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (WriteError, UnknownType) as exc:
        raise _write_error_of(exc) from None


def _write_error_of(exc: BaseException) -> BaseException:
    if isinstance(exc, DiskFullError):  # the writer names the directory; nothing was changed
        return RpcError(DISK_FULL, str(exc), {"directory": exc.directory})
    if isinstance(exc, UnknownType):
        return InvalidParams(str(exc))
    if isinstance(exc, SessionError):
        return InvalidParams(str(exc))
    for cls, code in _CODES.items():
        if isinstance(exc, cls):
            return RpcError(code, str(exc))
    return exc
