"""``memoryd run``: start-up → main loop → time-limited shutdown.

Start-up order matters and is chosen so that no change is ever lost, and so
that every cheap check fails before the expensive model load (~1-8 s, more on
first use):

0. cheap checks: the config was validated by the CLI; the data-directory lock
   (one writer per index: a second daemon fails here) and the socket path
   (another daemon answering there, a directory that is not ours);
1. load the model and open the index;
2. queue the start-up reconcile *first* on the worker's queue;
3. start the socket server (queries are answered during reconcile;
   ``status`` says ``reconciling``), then the debouncer and the watchers —
   events seen while reconciling queue up behind it;
4. start the worker, tell systemd ``READY=1``, start the scheduler.

Signals only set flags (uvicorn's pattern): the first SIGTERM/SIGINT asks for
a clean shutdown (finish the batch in hand, save, remove the socket, exit 0
within ~10 s); a second one exits at once. SIGHUP reloads the config (roots
added or removed are watched/dropped and reconciled).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from memoryd.daemon.api.admin import AdminMethods
from memoryd.daemon.api.bank import BankMethods
from memoryd.daemon.api.confined_paths import confine_paths
from memoryd.daemon.api.files import FileMethods
from memoryd.daemon.api.history import HistoryMethods
from memoryd.daemon.api.jobs import Jobs
from memoryd.daemon.api.manage import ManageMethods
from memoryd.daemon.api.observe import ObserveMethods
from memoryd.daemon.api.read import ReadMethods, query_vector_of
from memoryd.daemon.api.read_audit import audit_reads, open_read_audit
from memoryd.daemon.api.status import DaemonStatus, RootStatus, WatchState, ring_sizes
from memoryd.daemon.api.vocabulary import unlisted
from memoryd.daemon.api.write import WriteMethods, open_audit_log
from memoryd.daemon.datalock import DataDirLock
from memoryd.daemon.exits import EXIT_OK, EXIT_STARTUP
from memoryd.daemon.invocation import memoryd_command
from memoryd.daemon.logs import configure_logging
from memoryd.daemon.memtrim import limit_arenas, trim
from memoryd.daemon.oneshot import ensure_roots, open_index
from memoryd.daemon.private import check_data_dir, set_private_umask
from memoryd.daemon.procstat import rss_bytes, tree_bytes
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Handler
from memoryd.daemon.rpc.server import SocketServer
from memoryd.daemon.rpc.sockpath import check_socket_path
from memoryd.daemon.sdnotify import SystemdNotifier, listen_fds, watchdog_interval_s
from memoryd.daemon.watch.debouncer import Debouncer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.watch.watcher import Watcher
from memoryd.daemon.work.abstract_job import AbstractJob
from memoryd.daemon.work.line_vectors import line_cache_of
from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.daemon.work.scheduler import Scheduler
from memoryd.daemon.work.worker import IndexWorker
from memoryd.indexer.access import resolve_target
from memoryd.indexer.config import Config
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.errors import DaemonError, MemorydError
from memoryd.indexer.llm.client import LLMClient, client_for
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
from memoryd.indexer.write.editor import MemoryEditor
from memoryd.indexer.write.history import History
from memoryd.indexer.write.journal import JOURNAL_DIR, EditJournal
from memoryd.indexer.write.recovery import recover

SHUTDOWN_BUDGET_S = 9.0
SERVER_STOP_S = 2.0  # of the budget: running requests answer, then the connections close

log = structlog.get_logger("memoryd")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "0+unknown"


class Daemon:
    """The running process: owns every thread, the socket and the signals."""

    def __init__(self, cfg: Config, env: Mapping[str, str], reload: Callable[[], Config] | None = None) -> None:
        self.cfg = cfg
        self.env = env
        self.version = _version()
        self.started = time.monotonic()
        self.log = log
        self._reload = reload
        self.notifier = SystemdNotifier(env)
        self.should_exit = threading.Event()
        self._hup = threading.Event()
        self.path_filter = PathFilter(cfg.watch.include, cfg.watch.exclude)
        self.roots = RootMap(cfg.effective_roots)
        self._lock: DataDirLock | None = None
        self.index: MemoryIndex = None  # type: ignore[assignment]  # set in startup()
        self.worker: IndexWorker = None  # type: ignore[assignment]
        self.server: SocketServer | None = None
        self.debouncer: Debouncer | None = None
        self.watcher: Watcher | None = None
        self.scheduler: Scheduler | None = None
        self.query_embeddings: QueryEmbeddings | None = None
        self.last_failure: str | None = None
        self.on_shutdown: list[Callable[[], object]] = []  # run once the socket is closed (e.g. audit flush)
        self.history = History.in_data_dir(cfg.data_dir)  # one instance: it caches what it has parsed
        self.observe_status: Callable[[], dict[str, Any]] | None = None  # set by build_handlers (observe)
        self.jobs = Jobs()  # long writes under way (import), for status and the CLI's progress

    # -- start-up ---------------------------------------------------------------

    def startup(self) -> None:
        """Bring everything up; raises MemorydError (after undoing what started) on failure."""
        try:
            self._startup()
        except BaseException:
            self.shutdown()
            raise

    def _startup(self) -> None:
        cfg = self.cfg
        roots = ensure_roots(cfg)
        self.roots = RootMap(roots)
        self._lock = DataDirLock(cfg.data_dir)
        self._lock.acquire()
        check_data_dir(cfg.data_dir)
        recover_edits(self.history, self.roots)  # before anything reads a memory file
        fds = listen_fds(self.env)
        if not fds:  # socket-activated: systemd holds the socket, nobody else can bind it
            check_socket_path(cfg.socket_path)
        self.notifier.status("loading the embedding model")
        self.index = open_index(cfg, background_rebuilds=True)
        trim("model loaded")
        _quiet_faiss_threads()
        self.query_embeddings = QueryEmbeddings(self.index.embedder)
        self.worker = IndexWorker(self.index, self.roots, self.path_filter, self.path_filter.accept_dir,
                                  on_status=self.notifier.status, should_stop=self.should_exit.is_set)
        self.worker.request_reconcile("start-up")
        srv = cfg.server
        self.server = SocketServer(
            cfg.socket_path, build_handlers(self), allowed_uids=srv.allowed_uids,
            max_request_bytes=srv.max_request_bytes, max_clients=srv.max_clients,
            idle_timeout_s=srv.idle_timeout_s, read_timeout_s=srv.read_timeout_s,
            listen_fd=fds[0] if fds else None,
        )
        self.server.start()
        self.debouncer = Debouncer(self.worker.submit_changes, quiet_ms=cfg.watch.debounce_ms,
                                   max_delay_ms=cfg.watch.max_delay_ms, settle_ms=cfg.watch.settle_ms)
        self.debouncer.start()
        self.watcher = Watcher(self.roots.roots, self.path_filter, self.debouncer.submit, self._watch_failed,
                               poll_interval_s=cfg.watch.poll_fallback_s)
        self.watcher.start()
        self.worker.start()
        self.notifier.ready("reconciling")
        self.scheduler = Scheduler(self.worker, self.index, cfg.schedule, self._check_watchers)
        self.scheduler.start()
        me = memoryd_command()  # the venv's path when `memoryd` on PATH is not this one
        log.info("daemon.ready", socket=str(self.server.address), roots=[str(r) for r in self.roots.roots],
                 data_dir=str(cfg.data_dir), model=self.index.embedder.model_id, pid=os.getpid(),
                 startup_s=round(time.monotonic() - self.started, 2),
                 try_search=f"{me} search --socket {self.server.address} \"what did we decide\"",
                 try_status=f"{me} status --socket {self.server.address}")

    def _check_watchers(self) -> None:
        if self.watcher is not None:
            self.watcher.check()

    def _watch_failed(self, root: Any, reason: str) -> None:
        """The watcher lost events (overflow, observer died): only a full reconcile is safe."""
        self.last_failure = f"{root}: {reason}"
        log.error("watcher.failed", root=str(root), reason=reason, action="observer restarted; full reconcile")
        if self.worker is not None:
            self.worker.request_reconcile(f"watcher failure on {root}")

    # -- main loop --------------------------------------------------------------

    def main_loop(self) -> None:
        interval = watchdog_interval_s(self.env)
        tick = min(interval, 1.0) if interval else 1.0
        while not self.should_exit.wait(tick):
            if self._hup.is_set():
                self._hup.clear()
                self.reload_config()
            if interval and self.healthy():
                self.notifier.watchdog_ping()

    def healthy(self) -> bool:
        """Worker thread alive: the watchdog stops being fed when it is not, and systemd restarts us."""
        return self.worker is not None and self.worker.alive

    def reload_config(self) -> None:
        if self._reload is None:
            return
        try:
            new = self._reload()
        except MemorydError as exc:
            log.error("config.reload_failed", error=str(exc), action="keeping the running config")
            return
        old_roots = set(self.roots.roots)
        roots = RootMap(ensure_roots(new))
        if set(roots.roots) == old_roots:
            log.info("config.reloaded", roots_changed=False, note="settings other than roots apply at restart")
            return
        self.roots = roots
        self.worker.set_roots(roots)
        if self.watcher is not None:
            self.watcher.stop()
        assert self.debouncer is not None  # reload only runs after a complete start-up
        self.watcher = Watcher(roots.roots, self.path_filter, self.debouncer.submit, self._watch_failed,
                               poll_interval_s=new.watch.poll_fallback_s)
        self.watcher.start()
        self.worker.request_reconcile("roots changed")
        log.info("config.reloaded", roots_changed=True, roots=[str(r) for r in roots.roots])

    # -- status -----------------------------------------------------------------

    def status(self) -> DaemonStatus:
        st = self.index.status()
        watch = self.watcher.status() if self.watcher else {}
        roots = tuple(RootStatus(str(r), WatchState.from_watcher(w) if (w := watch.get(str(r))) else None)
                      for r in self.roots.roots)
        pending = self.worker.pending + (self.debouncer.pending_count if self.debouncer else 0)
        # Keyword first: a sweep is not over while its chunks still wait for vectors (whoever waits
        # for "not reconciling" gets full hybrid quality; keyword search already covers them).
        reconciling = self.worker.reconciling or st.vectors.pending > 0
        return DaemonStatus(
            version=self.version, pid=os.getpid(), uptime_s=round(time.monotonic() - self.started, 3), index=st,
            pending=pending, reconciling=reconciling, reconcile_progress=self.worker.reconcile_progress, roots=roots,
            reconcile=self.worker.reconcile_status(), last_reconcile=_iso(self.worker.last_reconcile),
            last_error=self.worker.last_error, last_watch_failure=self.last_failure,
            socket=str(self.cfg.socket_path), data_dir=str(self.cfg.data_dir),
            debounced=self.debouncer.ready_counts if self.debouncer else {},
            data_dir_bytes=tree_bytes(self.cfg.data_dir), rss_bytes=rss_bytes(),
            jobs=self.jobs.snapshot(), history=ring_sizes(self.history.sizes()),
            observe=self.observe_status() if self.observe_status is not None else None,
        )

    # -- shutdown ---------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop in reverse order within ~10 s; safe to call on a half-started daemon.

        The socket server stops in two steps around the worker so that every
        request gets an answer: first no new connections (new requests are
        answered "shutting down"); then the worker finishes or cancels what is
        queued, waking the requests that wait on it; then the server answers
        "shutting down" to whatever still runs and closes.
        """
        deadline = time.monotonic() + SHUTDOWN_BUDGET_S
        self.should_exit.set()
        self.notifier.stopping()
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.server is not None:
            self.server.begin_stop()
        if self.watcher is not None:
            self.watcher.stop()
        if self.debouncer is not None:
            self.debouncer.flush()
            self.debouncer.stop()
        budget = deadline - time.monotonic() - SERVER_STOP_S - 1
        if self.worker is not None and not self.worker.stop(timeout=max(0.5, budget)):
            log.warning("shutdown.worker_busy", action="exiting without waiting; the next start reconciles")
        if self.server is not None:
            self.server.stop(timeout=SERVER_STOP_S)
        for hook in self.on_shutdown:
            hook()
        if self.query_embeddings is not None:
            self.query_embeddings.close()
        if self.index is not None and (self.worker is None or not self.worker.alive):
            self.index.close()
        if self._lock is not None:
            self._lock.release()
        log.info("daemon.stopped", uptime_s=round(time.monotonic() - self.started, 1))


def build_handlers(d: Daemon) -> dict[str, Handler]:
    """Every socket method, each built from the parts it uses (the only place that knows them all).

    The roots are read through a getter: a config reload replaces them.
    """
    cfg = d.cfg

    def roots() -> RootMap:
        return d.roots

    def new_writer() -> MemoryEditor:  # an editor: `undo` must also revert a clear or a section update
        return MemoryEditor(d.index, d.roots.roots[0], cfg.write, history=d.history)

    line_cache = line_cache_of(d.index) if cfg.search.context_line_model else None  # context: line vectors kept
    # The daemon's one [llm] client (None: provider "off"): observe, proposals, summaries and abstracts
    # share it, so one per-day token budget covers them all.
    llm = client_for(cfg.llm, cfg.llm_api_key, cfg.data_dir)

    def model() -> JsonModel | None:
        return llm

    abstracts = start_abstracts(d, llm)  # file abstracts made at idle time (daemon/work/abstract_job.py)
    reads = ReadMethods(
        index=d.index, roots=roots, worker=d.worker, search=cfg.search, path_filter=d.path_filter,
        max_file_bytes=cfg.watch.max_file_bytes, count_tokens=d.index.embedder.count_tokens,
        query_vector=query_vector_of(d.query_embeddings), embedder=d.index.embedder,
        line_cache=line_cache, redact_level=cfg.write.redact_index, model=model, abstracts=abstracts,
    )
    if line_cache is not None:
        d.on_shutdown.append(line_cache.close)
    audit_log = open_audit_log(cfg.write, cfg.data_dir)
    d.on_shutdown.append(audit_log.flush)  # refusals counted but not yet summarised (memoryd.daemon.api.audit)
    writes = WriteMethods(worker=d.worker, roots=roots, cfg=cfg.write, audit_log=audit_log, new_writer=new_writer,
                          index=d.index)
    history = HistoryMethods(writes=writes, history=d.history, roots=roots)
    manage = ManageMethods(writes=writes, roots=roots, cfg=cfg.write, max_file_bytes=cfg.watch.max_file_bytes,
                           new_editor=new_writer, jobs=d.jobs, max_request_bytes=cfg.server.max_request_bytes)
    files = FileMethods(roots=roots, path_filter=d.path_filter)
    # Memory Bank proposals: the [llm] client when the daemon holds one (None: the rules propose)
    bank = BankMethods(writes=writes, roots=roots, model=model)
    writes.read_audit_log = read_log = open_read_audit(cfg.write, cfg.data_dir)
    d.on_shutdown.append(read_log.flush)
    observe = _observe_methods(d, writes, llm)
    handlers = (AdminMethods(d).handlers() | reads.handlers() | writes.handlers() | history.handlers()
                | manage.handlers() | files.handlers() | bank.handlers() | observe.handlers())
    no_row, no_handler = unlisted(handlers)
    if no_row or no_handler:  # the gate and the audits read the table: a method must be in it (docs/socket-methods.md)
        raise DaemonError(f"socket methods without a row in memoryd.daemon.api.vocabulary: {no_row}; "
                          f"rows without a handler: {no_handler}")
    return confine_paths(audit_reads(handlers, read_log), roots, cfg.data_dir)  # confined: no absolute path


def start_abstracts(d: Daemon, model: JsonModel | None) -> AbstractStore | None:
    """The abstract store and its idle-time job, when the daemon holds a model (None otherwise)."""
    if model is None:
        return None
    store = AbstractStore(d.cfg.data_dir / STORE_NAME)
    job = AbstractJob(model=model, store=store, roots=lambda: d.roots, path_filter=d.path_filter,
                      max_file_bytes=d.cfg.watch.max_file_bytes, redact_level=d.cfg.write.redact_index,
                      busy=lambda: d.worker is None or d.worker.pending > 0 or d.worker.reconciling)
    job.start()
    d.on_shutdown += [job.stop, store.close]
    return store


def _observe_methods(d: Daemon, writes: WriteMethods, llm: LLMClient | None) -> ObserveMethods:
    """``observe`` (daemon/api/observe.py), with the ``[llm]`` client when one is configured."""
    from memoryd.indexer.observe.session_notes import SessionNotes

    cfg = d.cfg
    observe = ObserveMethods(
        writes=writes, cfg=cfg.observe, data_dir=cfg.data_dir,
        new_notes=lambda: SessionNotes(d.index, d.roots.roots[0], cfg.write, history=d.history),
        llm=llm)
    d.on_shutdown.append(observe.close)
    d.observe_status = observe.status
    return observe


def recover_edits(history: History, roots: RootMap) -> dict[str, int]:
    """Settle the memory-file edits a kill interrupted (memoryd.indexer.write.journal): each is finished,
    was never started or is kept as the user left it, and recorded only where the file shows it. The
    journal's paths are resolved like every write's (a served root, then ``resolve_target``), so a
    planted journal file cannot make a start write outside the roots. Torn history tails go first."""
    served = {str(r): r for r in roots.roots}

    def resolve(root: str, rel: str) -> Path | None:
        base = served.get(root)
        return None if base is None else resolve_target(base, rel)

    history.heal()
    return recover(EditJournal(history.path.parent / JOURNAL_DIR), resolve, history.append_new)


def _quiet_faiss_threads() -> None:
    """One OpenMP thread for FAISS: exact search over a memory-sized index gains nothing from two,
    and idle OpenMP threads spin and steal the cores the query's embedding needs (bench/query_latency.py)."""
    import faiss

    faiss.omp_set_num_threads(1)


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def run_daemon(cfg: Config, reload: Callable[[], Config] | None = None) -> int:
    """The body of ``memoryd run``; returns the exit status."""
    set_private_umask()  # the whole process: files a library creates for us are private too (memoryd.daemon.private)
    configure_logging(cfg.log.level, cfg.log.format)
    logging.captureWarnings(True)  # library warnings (watchdog's included) go to the log, formatted
    limit_arenas()  # before any thread starts: see memoryd.daemon.memtrim
    d = Daemon(cfg, os.environ, reload)
    with _signals(d):
        try:
            d.startup()
        except MemorydError as exc:
            log.error("daemon.startup_failed", error=str(exc))
            print(f"memoryd: cannot start: {exc}", file=sys.stderr)
            return EXIT_STARTUP
        d.main_loop()
        d.shutdown()
    return EXIT_OK


@contextlib.contextmanager
def _signals(d: Daemon) -> Any:
    def on_exit(signum: int, frame: FrameType | None) -> None:
        if d.should_exit.is_set():
            log.warning("daemon.forced_exit", signal=signal.Signals(signum).name)
            os._exit(128 + signum)
        log.info("daemon.stopping", signal=signal.Signals(signum).name)
        d.should_exit.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        d._hup.set()

    handlers: dict[int, Any] = {signal.SIGTERM: on_exit, signal.SIGINT: on_exit, signal.SIGHUP: on_hup}
    previous = {sig: signal.signal(sig, h) for sig, h in handlers.items()}
    try:
        yield
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
