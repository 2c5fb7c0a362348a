"""The ``observe`` socket method: a conversation goes in (docs/conversations.md).

Capture always: the turns of the session not seen before are redacted line by line, appended to
the session's dated note through the write-ahead path, indexed, and remembered as seen
(:mod:`memoryd.indexer.observe.state`); retention then deletes whole old notes. All of it on
the index worker, so it never races indexing or another observe of the session.

Extraction when ``[llm]`` is configured (and ``observe.extract``): one combined call over the
session's turns not yet extracted, at most one call per agent namespace per ``observe.throttle_s``
(a ``final`` observe — the session ended — is not held back). It runs on this module's one
background thread, so the hook that sent the transcript is answered at once; ``wait`` runs it
before answering (the CLI's ``--wait``). Every proposal goes through the write path as the caller's
session with a turn id (so the per-turn and per-minute limits hold): memories through ``remember``
itself, experiences into ``experiences.md`` and profile signals into ``profile.md`` of the
namespace through the same gate, filter, dedup, history and audit. A failed call (malformed
answer, 429, 5xx, timeout, spent budget) writes nothing but the capture, is logged
(``observe.extract_failed``) and shown in ``status``; the turns stay pending for the next observe.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.daemon.api.observe_request import parse_observe
from memoryd.daemon.api.session import SessionClaim
from memoryd.daemon.rpc.errors import ACCESS_DENIED, WRITE_DISABLED, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.indexer.access import REMEMBER, Namespace, authorize, check_relative, parse_namespace
from memoryd.indexer.errors import AccessDenied, WriteError
from memoryd.indexer.observe import extract as ext
from memoryd.indexer.observe import state as obs_state
from memoryd.indexer.observe.notes import note_rel, now_utc, redact_turn, render, rolls_over
from memoryd.indexer.write.intake import Rejected, prepare

if TYPE_CHECKING:
    from memoryd.daemon.api.write import WriteMethods
    from memoryd.indexer.access import Session
    from memoryd.indexer.llm.client import LLMClient
    from memoryd.indexer.observe.config import ObserveConfig
    from memoryd.indexer.write.session_notes import SessionNotes

log = structlog.get_logger("memoryd.observe")
EXPERIENCES_FILE = "experiences.md"
PROFILE_FILE = "profile.md"


@dataclasses.dataclass(frozen=True)
class _Job:
    ns: Namespace
    sid: str
    session: dict[str, str]
    peer: Peer
    final: bool


class ObserveMethods:
    """``observe`` and its background extraction thread (started on first use, stopped by :meth:`close`)."""

    def __init__(self, *, writes: WriteMethods, cfg: ObserveConfig, data_dir: Path,
                 new_notes: Callable[[], SessionNotes], llm: LLMClient | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._writes = writes
        self._cfg = cfg
        self._data_dir = data_dir
        self._new_notes = new_notes
        self.llm = llm if cfg.extract else None
        self._client = llm  # the daemon's one [llm] client (summaries, abstracts, proposals use it too)
        self._clock = clock
        self._last_call: dict[str, float] = {}  # agent namespace -> when its last extraction call went
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.counts = {"observed": 0, "captured_turns": 0, "captured_bytes": 0, "extractions": 0,
                       "extraction_failures": 0, "proposed": 0, "written": 0}
        self.last_error: str | None = None

    def handlers(self) -> dict[str, Handler]:
        return {"observe": self.observe}

    def status(self) -> dict[str, Any]:
        """What ``status`` shows under ``observe``: counters, the last failure, the model's health."""
        with self._lock:
            counts = dict(self.counts)
            last_error = self.last_error
        client = self._client  # its health whether or not observe extracts: the other model features need it
        return {"enabled": self._cfg.enabled, "extraction": "llm" if self.llm is not None else "off",
                **counts, "last_error": last_error, "llm": client.health() if client is not None else None}

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(10)
        if self._client is not None:  # closed here even when observe.extract is off (its only closer)
            self._client.close()

    # -- the method -----------------------------------------------------------------

    def observe(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        if not self._cfg.enabled:
            raise RpcError(WRITE_DISABLED, "observe is disabled (observe.enabled = false)")
        req = parse_observe(params, peer)
        rec: dict[str, Any] = {"action": "observe", "uid": peer.uid, "pid": peer.pid}
        with self._writes.audited(rec):
            session = req.claim.resolve()
            rec["session"] = session.describe()
            ns = self._namespace(req.namespace, session)
            rec["namespace"] = str(ns)
            out = self._writes.on_worker(lambda: self._capture(ns, req.session_id, req.turns, session))
            rec.update(decision="captured" if out["captured"] else "unchanged", path=out["note"] or None,
                       bytes=out["bytes"])
        with self._lock:
            self.counts["observed"] += 1
            self.counts["captured_turns"] += out["captured"]
            self.counts["captured_bytes"] += out["bytes"]
        if self.llm is None:
            out["extraction"] = {"state": "off"}
        elif out["pending"] == 0:
            out["extraction"] = {"state": "nothing pending"}
        else:
            job = _Job(ns, req.session_id, session.describe(), peer, req.final)
            if req.wait:
                out["extraction"] = self._extract(job)
            else:
                self._start()
                self._queue.put(job)
                out["extraction"] = {"state": "queued"}
        return out

    def _namespace(self, raw: str | None, session: Session) -> Namespace:
        try:
            ns = parse_namespace(raw, session)
            authorize(session, REMEMBER, ns)
        except AccessDenied as exc:
            raise RpcError(ACCESS_DENIED, str(exc)) from None
        except WriteError as exc:
            raise InvalidParams(str(exc)) from None
        return ns

    # -- capture (index worker) -------------------------------------------------------

    def _capture(self, ns: Namespace, sid: str, turns: list[Any], session: Session) -> dict[str, Any]:
        st = obs_state.load(self._data_dir, str(ns), sid)
        seen = set(st.seen)
        new = [t for t in turns if t.id not in seen]
        now = now_utc()
        notes = self._new_notes()
        withheld = 0
        size = 0
        if new:
            today = now.date().isoformat()
            if not st.started or self._rolls_over(notes.root, st, now.date()):
                st.part = st.part + 1 if st.started == today else 1  # a new day's part needs no number
                st.started = today
                st.note = check_relative(note_rel(ns, self._cfg.folder, today, sid, st.part))
            kept = []
            for t in new:
                text, n = redact_turn(t.text)
                withheld += 1 if n < 0 else n
                kept.append((t.role, text))
                st.pending.append(obs_state.Pending(t.id, t.role, text, st.note))
            block = render(kept, now)
            size = len(block.encode())
            notes.append_turns(st.note, st.started, sid, block)
            st.seen.extend(t.id for t in new)
            del st.pending[:-self._cfg.max_pending_turns]
            if self.llm is None:
                st.pending.clear()  # no model: nothing waits for one (a model configured later starts from then)
            obs_state.save(self._data_dir, st)
            log.info("observe.captured", namespace=str(ns), path=st.note, turns=len(new), bytes=size,
                     withheld_lines=withheld)
        expired = self._retention(notes, ns, st.note, session)
        if expired:  # their turns' text must not outlive them here, waiting for a model
            dropped = obs_state.drop_pending_in(self._data_dir, str(ns), set(expired))
            if dropped:
                log.info("observe.pending_dropped", namespace=str(ns), turns=dropped, notes=len(expired))
                st = obs_state.load(self._data_dir, str(ns), sid)
        return {"note": st.note, "captured": len(new), "seen": len(turns) - len(new), "bytes": size,
                "withheld_lines": withheld, "pending": len(st.pending), "expired": expired}

    def _rolls_over(self, root: Path, st: obs_state.SessionState, today: date) -> bool:
        """Whether the session's note is done (too big, or too old: see ``rolls_over``); a note gone since
        (deleted by hand, or restored elsewhere) is empty, but not young again."""
        try:
            size = (root / st.note).stat().st_size
        except OSError:
            size = 0
        return rolls_over(st.started, size, today, self._cfg.keep_days, self._cfg.max_bytes)

    def _retention(self, notes: SessionNotes, ns: Namespace, current: str, session: Session) -> list[str]:
        doomed = notes.expired(ns, self._cfg.folder, date.today(), self._cfg.keep_days, self._cfg.max_bytes,
                               keep={current} if current else set())
        reason = f"observe retention (keep_days {self._cfg.keep_days}, max_bytes {self._cfg.max_bytes})"
        return [rel for rel in doomed if notes.expire(rel, session.describe(), reason) is not None]

    # -- extraction (background thread, or the request's with wait) --------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memoryd-observe", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self._extract(job)
            except Exception:  # the thread must outlive any one job; the log says what broke
                log.exception("observe.extract_crashed", namespace=str(job.ns))

    def _extract(self, job: _Job) -> dict[str, Any]:
        assert self.llm is not None
        from memoryd.indexer.llm.errors import LLMError

        key = str(job.ns)
        now = self._clock()
        with self._lock:
            last = self._last_call.get(key)
            if last is not None and not job.final and now - last < self._cfg.throttle_s:
                return {"state": "throttled", "retry_after_s": round(self._cfg.throttle_s - (now - last), 1)}
            self._last_call[key] = now
        st = self._writes.on_worker(lambda: obs_state.load(self._data_dir, key, job.sid))
        batch = list(st.pending)
        if not batch:
            return {"state": "nothing pending"}
        try:
            answer = self.llm.complete_json(ext.messages([(p.role, p.text) for p in batch],
                                                         self._cfg.max_prompt_chars), ext.SCHEMA, name="extraction")
        except LLMError as exc:
            self._settle(job, [], str(exc))
            log.warning("observe.extract_failed", namespace=key, error=str(exc), pending=len(batch),
                        action="captured only; the turns are extracted at the next observe")
            return {"state": "failed", "error": str(exc), "pending": len(batch)}
        props = ext.proposals(answer, self._cfg.max_memories)
        turn = f"observe:{obs_state.state_path(self._data_dir, key, job.sid).stem[:12]}:{st.extracted + len(batch)}"
        session = {**job.session, "turn": turn}
        results = [self._write(p, job, session) for p in props]
        self._settle(job, [p.id for p in batch], None)
        written = sum(1 for r in results if r.get("decision") in ("appended", "reinforced", "replaced"))
        with self._lock:
            self.counts["proposed"] += len(props)
            self.counts["written"] += written
        log.info("observe.extracted", namespace=key, turns=len(batch), proposed=len(props), written=written)
        return {"state": "done", "turns": len(batch), "proposed": len(props), "written": written, "results": results}

    def _settle(self, job: _Job, done: list[str], error: str | None) -> None:
        """Record the extraction's outcome in the session's state (on the worker: the capture writes it too)."""
        def update() -> None:
            st = obs_state.load(self._data_dir, str(job.ns), job.sid)
            gone = set(done)
            st.pending = [p for p in st.pending if p.id not in gone]
            st.extracted += len(gone)
            st.last_error = error
            obs_state.save(self._data_dir, st)

        self._writes.on_worker(update)
        with self._lock:
            self.counts["extractions" if error is None else "extraction_failures"] += 1
            self.last_error = error

    def _write(self, p: ext.Proposal, job: _Job, session: dict[str, str]) -> dict[str, Any]:
        """One proposal through the write path; its answer (or refusal) as a dict, never raised."""
        head = {"kind": p.kind, "content": p.content}
        try:
            if p.kind == "memory":
                params: dict[str, Any] = {"content": p.content, "namespace": str(job.ns), "session": session}
                if p.memory_type is not None:
                    params["type"] = p.memory_type
                got = self._writes.remember(params, job.peer)
                return {**head, "decision": got.get("decision"), "path": got.get("path"),
                        "reason": got.get("reason")}
            target = EXPERIENCES_FILE if p.kind == "experience" else PROFILE_FILE
            return {**head, **self._entry(p, target, job, session)}
        except RpcError as exc:
            return {**head, "decision": "refused", "reason": exc.message}

    def _entry(self, p: ext.Proposal, file: str, job: _Job, session: dict[str, str]) -> dict[str, Any]:
        """An experience or a profile signal: ``remember``'s checks and audit, into its own file and section."""
        w = self._writes
        rec: dict[str, Any] = {"action": "remember", "uid": job.peer.uid, "pid": job.peer.pid,
                               "bytes": len(p.content.encode("utf-8", "surrogatepass"))}
        with w.audited(rec):
            # Without the turn id: an owner's extraction bookkeeping is not one of the agent's 3 memory calls
            # of the turn (the memories are); a confined session stays held to its limits all the same.
            plain = {k: v for k, v in session.items() if k != "turn"}
            sess = w.admit(SessionClaim(plain, owner_allowed=job.peer.uid == os.getuid()), rec)
            w.check_size(rec["bytes"])
            rec["namespace"] = str(job.ns)
            try:
                authorize(sess, REMEMBER, job.ns)
                plan = prepare(p.content, job.ns, date.today(), p.memory_type)
            except WriteError as exc:
                rec.update(decision="denied", reason=str(exc))
                return {"decision": "refused", "reason": str(exc)}
            if isinstance(plan, Rejected):
                rec.update(decision="rejected", reason=plan.reason, rule=plan.rule)
                return {"decision": "rejected", "reason": plan.reason}
            target = check_relative(f"{job.ns.folder}/{file}" if job.ns.folder else file)
            route = dataclasses.replace(plan.route, target=file, section=p.section, section_level=2,
                                        highlights=False, matched="observe", importance=p.importance)
            plan = dataclasses.replace(plan, target=target, route=route)
            rec["path"] = target
            outcome = w.on_worker(lambda: w.new_writer().remember(plan, sess.describe()))
            rec.update(decision=outcome.decision, path=outcome.path, line=outcome.line, reason=outcome.reason)
            return {"decision": outcome.decision, "path": outcome.path, "reason": outcome.reason}
