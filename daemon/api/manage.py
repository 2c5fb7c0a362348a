"""The memory-management socket methods (docs/memory-api.md): ``list``, ``export``, ``stats``, ``import``,
``clear``, ``update_section`` and ``promote``.

Reads (``list``, ``export``, ``stats``) read the files of the first root, confined
like ``search``: a direct or group session sees only its own namespace, whatever it
asks for (another namespace is ``ACCESS_DENIED``), and each file must resolve inside
it (:func:`memoryd.daemon.api.access.path_check`).

Writes run like ``remember`` (:class:`memoryd.daemon.api.write.WriteMethods`): session →
``write.enabled`` and the rate limits → size limit → permission → the edit on the
index worker → one audit record, and every replaced or removed text goes to the
history (``memoryd undo``). ``import``, ``clear`` and ``promote`` are for the owner
only (a bulk write, an emptied namespace, a copy across namespaces);
``update_section`` is allowed in the namespaces a session may ``remember`` into.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from datetime import date
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memoryd.daemon.api import path_redaction as shown_paths
from memoryd.daemon.api.access import path_check
from memoryd.daemon.api.jobs import Jobs
from memoryd.daemon.api.manage_requests import (
    MAX_IMPORT_LINES,
    Filters,
    parse_clear,
    parse_export,
    parse_import,
    parse_list,
    parse_promote,
    parse_section,
    parse_stats,
)
from memoryd.daemon.api.redaction import files_for
from memoryd.daemon.api.session import SessionClaim, owner_only
from memoryd.daemon.api.vocabulary import ExportReply, ListReply, StatsReply, WriteReply
from memoryd.daemon.api.write import WriteMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import (
    ACCESS_DENIED,
    BAD_TARGET,
    ENTRY_NOT_FOUND,
    SECTION_REFUSED,
    WRITE_CONFLICT,
    InvalidParams,
    RpcError,
)
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.indexer.access import (
    READ,
    REMEMBER,
    Namespace,
    Session,
    authorize,
    namespace_of,
    own_namespace,
    parse_namespace,
)
from memoryd.indexer.config import WriteConfig
from memoryd.indexer.errors import AccessDenied, BadTarget, EntryNotFound, WriteConflict, WriteError
from memoryd.indexer.markdown.sections import SectionRefused, check_allowed
from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.entries import MemoryFile, memory_files, page, select
from memoryd.indexer.write.intake import Accepted, Rejected, prepare
from memoryd.indexer.write.listing import FolderCache
from memoryd.indexer.write.restore import Restore, check_restore
from memoryd.indexer.write.transfer import JSONL, BadLine, ImportItem, export_jsonl, parse_jsonl, to_markdown

if TYPE_CHECKING:  # the editor and the importer (dedup's candidates, the embedding cache) bring numpy
    from memoryd.indexer.write import importer
    from memoryd.indexer.write.editor import MemoryEditor

T = TypeVar("T")
_CODES: dict[type[WriteError], int] = {AccessDenied: ACCESS_DENIED, BadTarget: BAD_TARGET,
                                       EntryNotFound: ENTRY_NOT_FOUND, WriteConflict: WRITE_CONFLICT}
OWNER_NAMESPACES = ("default", "agent")  #: the kinds ``promote`` may copy into
PEER_NAMESPACES = ("peer", "group")  #: the kinds ``promote`` copies from


class ManageMethods:
    """The methods and what they share with the write methods (``writes``: limits, audit log, worker)."""

    def __init__(self, *, writes: WriteMethods, roots: Callable[[], RootMap], cfg: WriteConfig, max_file_bytes: int,
                 new_editor: Callable[[], MemoryEditor], jobs: Jobs | None = None,
                 max_request_bytes: int = 1_048_576) -> None:
        self._writes = writes
        self._jobs = jobs or Jobs()
        self._cfg = cfg
        self._roots = roots
        self._max_file_bytes = max_file_bytes
        self._new_editor = new_editor
        self._max_request_bytes = max_request_bytes  # the socket's cap, told to importers so they split under it
        self._dry_runs: OrderedDict[str, Any] = OrderedDict()  # import_id -> importer.Overlay, latest last
        self._dry_lock = threading.Lock()
        self._folder = FolderCache(max_file_bytes)  # list and stats: no read of every file per call

    def handlers(self) -> dict[str, Handler]:
        return {"list": self.list_entries, "export": self.export, "stats": self.stats, "import": self.import_,
                "clear": self.clear, "update_section": self.update_section, "promote": self.promote}

    # -- reads ----------------------------------------------------------------------

    def list_entries(self, params: dict[str, Any], peer: Peer) -> ListReply:
        req = parse_list(params, peer)
        session, first, rels = self._paths(req.claim, req.filters.namespace)
        after = req.cursor.rpartition(":")[0] if req.cursor else None  # files before the cursor's are skipped unread
        files = (files_for(session, [f], self._cfg.redact_index)[0]
                 for f in self._folder.files_from(first, rels, after, req.filters.type))
        entries = select(files, memory_type=req.filters.type, since=req.filters.since, until=req.filters.until)
        try:
            found, cursor = page(entries, req.cursor, req.limit)
        except ValueError as exc:
            raise InvalidParams(str(exc)) from None
        return {"entries": [e.to_dict() for e in shown_paths.entries(found)],
                "next_cursor": cursor if cursor is None else shown_paths.shown(cursor)}

    def export(self, params: dict[str, Any], peer: Peer) -> ExportReply:
        req = parse_export(params, peer)
        files = self._files(req.claim, req.filters.namespace)
        if req.format == JSONL:
            entries = shown_paths.entries(list(select(files, memory_type=req.filters.type, since=req.filters.since,
                                                      until=req.filters.until)))
            count, text = export_jsonl(shown_paths.files(files), entries)  # both redacted alike: lines still found
            return {"format": JSONL, "count": count, "text": text}
        if req.filters != Filters(req.filters.namespace, None, None, None):
            raise InvalidParams("params 'type', 'since' and 'until' select entries: use them with format 'jsonl'")
        return {"format": req.format, "count": len(files), "text": to_markdown(shown_paths.files(files))}

    def stats(self, params: dict[str, Any], peer: Peer) -> StatsReply:
        req = parse_stats(params, peer)
        _session, first, rels = self._paths(req.claim, req.namespace)
        per = shown_paths.per_namespace(self._folder.stats(first, rels))
        total = {k: sum(row[k] for row in per.values()) for k in ("files", "entries", "bytes")}
        return {"namespaces": per, "total": total}

    def _scope(self, claim: SessionClaim,
               raw: str | None) -> tuple[Session, Path, Namespace | None, Callable[[str], bool]]:
        """The claimed session, the first root, namespace ``raw`` (None: all the session may read), checked
        as readable, and which of the root's paths the session may see."""
        session = claim.resolve()
        ns = own_namespace(session) if raw is None else _checked(lambda: parse_namespace(raw, session))
        _checked(lambda: authorize(session, READ, ns))
        roots = self._roots()
        first = roots.roots[0]
        check = path_check(session, roots)
        accept = (lambda rel: True) if check is None else (lambda rel: check(str(first), rel))
        return session, first, ns, accept

    def _paths(self, claim: SessionClaim, raw: str | None) -> tuple[Session, Path, list[str]]:
        """The session, the first root and the paths of namespace ``raw``, from the folder cache
        (``list`` and ``stats``; ``export`` reads everything anyway)."""
        session, first, ns, accept = self._scope(claim, raw)
        return session, first, self._folder.paths(first, ns, accept)

    def _files(self, claim: SessionClaim, raw: str | None) -> list[MemoryFile]:
        """The files of namespace ``raw`` (None: all the session may read), for the claimed session."""
        session, first, ns, accept = self._scope(claim, raw)
        return files_for(session, memory_files(first, ns, accept, self._max_file_bytes), self._cfg.redact_index)

    # -- writes ---------------------------------------------------------------------

    def update_section(self, params: dict[str, Any], peer: Peer) -> WriteReply:
        req = parse_section(params, peer)
        rec: dict[str, Any] = {"action": "update_section", "uid": peer.uid, "pid": peer.pid,
                               "bytes": len(req.content.encode("utf-8", "surrogatepass"))}
        with self._writes.audited(rec):
            # Seed 003's matrix: every update_* is the owner's (direct and group sessions: ❌).
            session = self._owner(req.claim, rec, "update_section")
            self._writes.check_size(rec["bytes"])
            rel = self._writes.relative_target(req.path)
            rec.update(path=rel, namespace=str(namespace_of(rel)))
            title = _checked(lambda: check_allowed(req.section, self._cfg.sections))
            secret = privacy.check(req.content)
            if not secret.passed:
                rec.update(decision="rejected", reason=secret.reason, rule=secret.rule)
                return {"decision": "rejected", "reason": secret.reason, "rule": secret.rule, "stage": "privacy"}
            editor = self._new_editor()
            outcome = self._on_worker(lambda: editor.update_section(rel, title, req.content, session.describe()))
            rec.update(decision=outcome.decision, line=outcome.line, reason=outcome.reason)
            return cast(WriteReply, {**outcome.to_dict(), "section": title})  # Outcome's fields

    def promote(self, params: dict[str, Any], peer: Peer) -> WriteReply:
        req = parse_promote(params, peer)
        rec: dict[str, Any] = {"action": "promote", "uid": peer.uid, "pid": peer.pid, "line": req.line}
        with self._writes.audited(rec):
            session = self._owner(req.claim, rec, "promote")
            rel = self._writes.relative_target(req.path)
            source = namespace_of(rel)
            rec["path"] = rel
            if source.kind not in PEER_NAMESPACES:
                raise RpcError(BAD_TARGET, f"promote copies from a peer or group namespace; {rel[:200]} is in {source}")
            to = _checked(lambda: parse_namespace(req.to, session))
            rec["namespace"] = str(to)
            if to.kind not in OWNER_NAMESPACES:
                raise RpcError(BAD_TARGET, f"promote copies into an owner namespace ('default' or 'agent:ID'), "
                               f"not {to}")
            editor = self._new_editor()
            result, plan = self._on_worker(lambda: editor.promote(rel, req.line, to, date.today(),
                                                                  session.describe(), req.type, req.expect))
            src = {"path": rel, "line": req.line, "namespace": str(source)}
            if isinstance(result, Rejected):
                rec.update(decision="rejected", reason=result.reason, rule=result.rule)
                return {"decision": "rejected", "reason": result.reason, "rule": result.rule, "stage": result.stage,
                        "source": src}
            rec.update(decision=result.decision, path=result.path, line=result.line, reason=result.reason)
            return cast(WriteReply, {**result.to_dict(), **(plan.describe() if plan else {}), "source": src})

    def import_(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        req = parse_import(params, peer)
        rec: dict[str, Any] = {"action": "import", "uid": peer.uid, "pid": peer.pid,
                               "bytes": len(req.data.encode("utf-8", "surrogatepass"))}
        with self._writes.audited(rec):
            session = self._owner(req.claim, rec, "import")
            if req.namespace is not None:
                rec["namespace"] = str(_checked(lambda: parse_namespace(req.namespace, session)))
            report: list[dict[str, Any]] = []
            lines: list[importer.Line] = []
            for item in parse_jsonl(req.data):
                checked = self._import_item(item, req.namespace, session)
                if isinstance(checked, Accepted | Restore):
                    lines.append((item.line, checked))
                else:
                    report.append(checked)
            reply: dict[str, Any] = {}
            report += self._import_lines(lines, req.dry_run, session.describe(), req.continues, reply)
            report.sort(key=lambda r: int(r["input_line"]))
            summary = dict(Counter(str(r["decision"]) for r in report))
            rec.update(decision="dry_run" if req.dry_run else "imported",
                       reason=", ".join(f"{n} {d}" for d, n in sorted(summary.items())) or "nothing to import")
            return {"dry_run": req.dry_run, "summary": summary, "entries": report, **reply,
                    "limits": {"max_lines": MAX_IMPORT_LINES, "max_request_bytes": self._max_request_bytes}}

    def _import_lines(self, lines: list[importer.Line], dry_run: bool, session: dict[str, str],
                      continues: str | None, reply: dict[str, Any]) -> list[dict[str, Any]]:
        """Every line is decided on this thread, reading only (:func:`importer.plan`, the same for a dry run
        and a real one); a real import then carries the decisions out in slices of ``IMPORT_SLICE_S`` on
        the worker, which runs the saves queued meanwhile between two slices. The job counts each line
        once decided and once done (a dry run: once).

        A dry run's decisions are kept under its ``import_id`` (in ``reply``) for the next request of the
        same dry run (``continues``): nothing was written, so that is how it sees the lines before it."""
        from memoryd.indexer.write import importer

        editor = self._new_editor()
        n = len(lines)
        with self._jobs.run("import", n if dry_run else 2 * n, dry_run) as job:
            if dry_run and not lines and continues is None:
                return []  # nothing to decide (memoryd import asks for the limits so): nothing to keep
            if dry_run:
                rid, overlay = self._dry_overlay(continues, editor.root)
                reply["import_id"] = rid
                return importer.dry_report(editor, importer.plan(editor, lines, job.advance_to, overlay=overlay))
            steps = importer.plan(editor, lines, job.advance_to)
            out: list[dict[str, Any]] = []
            done = 0
            while done < n:
                part, done = self._on_worker(partial(importer.execute, editor, steps, done, session, IMPORT_SLICE_S))
                out += part
                job.advance_to(n + done)
            return out

    def _dry_overlay(self, continues: str | None, root: Any) -> tuple[str, importer.Overlay]:
        """The overlay of the dry run ``continues`` (a fresh one for None); the oldest of more than
        :data:`DRY_RUNS_KEPT` are dropped. Raises InvalidParams for an id not (or no longer) kept."""
        from memoryd.indexer.write import importer

        with self._dry_lock:
            if continues is None:
                rid, overlay = f"imp-{secrets.token_hex(8)}", importer.Overlay(root)
            elif continues in self._dry_runs:
                rid, overlay = continues, self._dry_runs.pop(continues)
            else:
                raise InvalidParams(f"param 'continues': no dry run {continues[:40]!r} is kept (at most "
                                    f"{DRY_RUNS_KEPT}, the latest); start the dry run again")
            self._dry_runs[rid] = overlay
            while len(self._dry_runs) > DRY_RUNS_KEPT:
                self._dry_runs.popitem(last=False)
        return rid, overlay

    def _import_item(self, item: ImportItem | BadLine, default_ns: str | None,
                     session: Session) -> Accepted | Restore | dict[str, Any]:
        """An import line's plan (a restore for a line with a ``path``), or its report line: invalid, over
        the size limit, outside what the session may write, gated or filtered."""
        if isinstance(item, BadLine):
            return {"input_line": item.line, "decision": "invalid", "reason": item.reason}
        limit = self._cfg.max_content_bytes
        if item.path is not None:
            return check_restore(item, session, limit)
        if len(item.text.encode("utf-8", "surrogatepass")) > limit:
            return {"input_line": item.line, "decision": "rejected", "stage": "limit",
                    "rule": "write.max_content_bytes", "reason": f"over {limit} bytes"}
        try:
            ns = parse_namespace(item.namespace or default_ns, session)
            authorize(session, REMEMBER, ns)
            plan = prepare(item.text, ns, date.today(), item.type)
        except WriteError as exc:  # a bad namespace or type on this line: the other lines go on
            return {"input_line": item.line, "decision": "invalid", "reason": str(exc)}
        if isinstance(plan, Rejected):
            return {"input_line": item.line, "decision": "rejected", "stage": plan.stage, "rule": plan.rule,
                    "reason": plan.reason}
        return plan

    def clear(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        req = parse_clear(params, peer)
        rec: dict[str, Any] = {"action": "clear", "uid": peer.uid, "pid": peer.pid}
        with self._writes.audited(rec):
            session = self._owner(req.claim, rec, "clear")
            ns = _checked(lambda: parse_namespace(req.namespace, session))
            rec["namespace"] = str(ns)
            rels = [f.rel for f in memory_files(self._roots().roots[0], ns, lambda rel: True, self._max_file_bytes)]
            editor = self._new_editor()
            result = self._on_worker(lambda: editor.clear(ns, rels, session.describe()))
            rec.update(decision="cleared", reason=f"{result['removed']} entries from {result['files']} files")
            return result

    # -- steps ------------------------------------------------------------------------

    def _owner(self, claim: SessionClaim, rec: dict[str, Any], what: str) -> Session:
        """The owner's session, refused to others before it is counted against the rate limits."""
        session = claim.resolve()
        rec["session"] = session.describe()
        owner_only(session, what)
        return self._writes.admit(claim, rec)

    def _on_worker(self, fn: Callable[[], T]) -> T:
        """:meth:`WriteMethods.on_worker`, with a refused section update answered as SECTION_REFUSED."""
        try:
            return self._writes.on_worker(fn)
        except SectionRefused as exc:
            raise RpcError(SECTION_REFUSED, str(exc), {"rule": exc.rule}) from None


DRY_RUNS_KEPT = 4
"""Dry runs whose decisions are kept for their next request (``continues``)."""
IMPORT_SLICE_S = 0.2
"""How long one slice of an import may hold the index worker before a queued save gets its turn."""


def _checked(fn: Callable[[], T]) -> T:
    """``fn()``, its write-path refusal turned into the socket's error (as for ``remember``)."""
    try:
        return fn()
    except SectionRefused as exc:
        raise RpcError(SECTION_REFUSED, str(exc), {"rule": exc.rule}) from None
    except WriteError as exc:
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), None)
        if code is None:
            raise InvalidParams(str(exc)) from None
        raise RpcError(code, str(exc)) from None

