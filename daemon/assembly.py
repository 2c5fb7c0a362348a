"""The composition root of the socket methods: the parts made at start-up, and the handlers built from them.

:class:`Parts` is frozen and built once, after the model is loaded and the index opened
(:meth:`memoryd.daemon.app.Daemon.startup`); :func:`build_handlers` reads it and nothing else —
no daemon, no mutable optional fields — and hands back what it opened for the daemon to close
(basic-memory's factory at the composition root; uvicorn's narrow state). The one value that
changes while the daemon runs, the roots (a config reload replaces them), is read through a getter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.api.admin import AdminMethods
from memoryd.daemon.api.bank import BankMethods
from memoryd.daemon.api.confined_paths import confine_paths
from memoryd.daemon.api.file_abstracts import FileAbstracts
from memoryd.daemon.api.files import FileMethods
from memoryd.daemon.api.history import HistoryMethods
from memoryd.daemon.api.jobs import Jobs
from memoryd.daemon.api.manage import ManageMethods
from memoryd.daemon.api.observe import ObserveMethods
from memoryd.daemon.api.ports import StatusProvider
from memoryd.daemon.api.read import ReadMethods, query_vector_of
from memoryd.daemon.api.read_audit import audit_reads, open_read_audit
from memoryd.daemon.api.vocabulary import unlisted
from memoryd.daemon.api.write import WriteMethods, open_audit_log
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Handler
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.abstract_job import AbstractJob
from memoryd.daemon.work.line_vectors import line_cache_of
from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.daemon.work.worker import IndexWorker
from memoryd.indexer.config import Config
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.errors import DaemonError
from memoryd.indexer.llm.client import LLMClient, client_for
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
from memoryd.indexer.write.editor import MemoryEditor
from memoryd.indexer.write.history import History


@dataclass(frozen=True)
class Parts:
    """What the socket methods are built from, made once at start-up.

    ``about``: the running daemon as ``ping`` and ``status`` see it (version, start time, status).
    ``roots``: the current roots (replaced by a config reload, hence a getter).
    """

    index: MemoryIndex
    worker: IndexWorker
    roots: Callable[[], RootMap]
    path_filter: PathFilter
    history: History  # one instance: it caches what it has parsed
    jobs: Jobs  # long writes under way (import), for status and the CLI's progress
    query_embeddings: QueryEmbeddings | None
    about: StatusProvider


@dataclass(frozen=True)
class Assembled:
    """Every socket method, and what building them opened: ``closers`` run once the socket is closed
    (the audit logs' pending refusal summaries, the line-vector cache), in order."""

    handlers: dict[str, Handler]
    closers: tuple[Callable[[], object], ...]
    observe_status: Callable[[], dict[str, Any]] | None = None  # observe's counters, for status


def build_handlers(cfg: Config, parts: Parts) -> Assembled:
    """Every socket method, each built from the parts it uses (the only place that knows them all).

    Raises DaemonError when a handler has no row in the vocabulary, or a row no handler: the
    session gate and the audits read the table (docs/socket-methods.md).
    """
    roots = parts.roots

    def new_writer() -> MemoryEditor:  # an editor: `undo` must also revert a clear or a section update
        return MemoryEditor(parts.index, roots().roots[0], cfg.write, history=parts.history)

    closers: list[Callable[[], object]] = []
    line_cache = line_cache_of(parts.index) if cfg.search.context_line_model else None  # context: kept line vectors
    embedder = parts.index.embedder
    # The daemon's one [llm] client (None: provider "off"): observe, proposals, summaries and abstracts
    # share it, so one per-day token budget covers them all.
    llm = client_for(cfg.llm, cfg.llm_api_key, cfg.data_dir)

    def model() -> JsonModel | None:
        return llm

    abstracts = _abstracts(cfg, parts, llm, closers)  # file abstracts made at idle time
    reads = ReadMethods(
        index=parts.index, roots=roots, worker=parts.worker, search=cfg.search, path_filter=parts.path_filter,
        max_file_bytes=cfg.watch.max_file_bytes, count_tokens=embedder.count_tokens,
        query_vector=query_vector_of(parts.query_embeddings), embedder=embedder,
        line_cache=line_cache, redact_level=cfg.write.redact_index, model=model, abstracts=abstracts,
    )
    if line_cache is not None:
        closers.append(line_cache.close)
    audit_log = open_audit_log(cfg.write, cfg.data_dir)
    closers.append(audit_log.flush)  # refusals counted but not yet summarised (memoryd.daemon.api.audit)
    writes = WriteMethods(worker=parts.worker, roots=roots, cfg=cfg.write, audit_log=audit_log,
                          new_writer=new_writer, index=parts.index)
    history = HistoryMethods(writes=writes, history=parts.history, roots=roots)
    manage = ManageMethods(writes=writes, roots=roots, cfg=cfg.write, max_file_bytes=cfg.watch.max_file_bytes,
                           new_editor=new_writer, jobs=parts.jobs, max_request_bytes=cfg.server.max_request_bytes)
    files = FileMethods(roots=roots, path_filter=parts.path_filter, abstracts=FileAbstracts(
        abstracts, model, cfg.watch.max_file_bytes, cfg.write.redact_index))  # files {abstracts: true}
    bank = BankMethods(writes=writes, roots=roots, model=model)  # Memory Bank proposals (seed 002)
    observe = _observe(cfg, parts, writes, llm, closers)
    writes.read_audit_log = read_log = open_read_audit(cfg.write, cfg.data_dir)
    closers.append(read_log.flush)
    handlers = (AdminMethods(parts.about).handlers() | reads.handlers() | writes.handlers() | history.handlers()
                | manage.handlers() | files.handlers() | bank.handlers() | observe.handlers())
    no_row, no_handler = unlisted(handlers)
    if no_row or no_handler:
        raise DaemonError(f"socket methods without a row in memoryd.daemon.api.vocabulary: {no_row}; "
                          f"rows without a handler: {no_handler}")
    # a confined session never sees an absolute path (docs/security.md, "Agent isolation")
    return Assembled(confine_paths(audit_reads(handlers, read_log), roots, cfg.data_dir), tuple(closers),
                     observe.status)


def _abstracts(cfg: Config, parts: Parts, llm: JsonModel | None,
               closers: list[Callable[[], object]]) -> AbstractStore | None:
    """The abstract store and its idle-time job (its own thread), when there is a model (None otherwise)."""
    if llm is None:
        return None
    store = AbstractStore(cfg.data_dir / STORE_NAME)
    worker = parts.worker
    job = AbstractJob(model=llm, store=store, roots=parts.roots, path_filter=parts.path_filter,
                      max_file_bytes=cfg.watch.max_file_bytes, redact_level=cfg.write.redact_index,
                      busy=lambda: worker.pending > 0 or worker.reconciling)
    job.start()
    closers += [job.stop, store.close]
    return store


def _observe(cfg: Config, parts: Parts, writes: WriteMethods, llm: LLMClient | None,
             closers: list[Callable[[], object]]) -> ObserveMethods:
    """``observe`` (daemon/api/observe.py), with the ``[llm]`` client when one is configured."""
    from memoryd.indexer.write.session_notes import SessionNotes

    observe = ObserveMethods(
        writes=writes, cfg=cfg.observe, data_dir=cfg.data_dir,
        new_notes=lambda: SessionNotes(parts.index, parts.roots().roots[0], cfg.write, history=parts.history),
        llm=llm)
    closers.append(observe.close)
    return observe
