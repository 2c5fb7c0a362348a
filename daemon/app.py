"""``memoryd run``: start-up → main loop → time-limited shutdown.

Start-up order matters and is chosen so that no change is ever lost, and so
that every cheap check fails before the expensive model load (~1-8 s, more on
first use):

0. cheap checks: the config was validated by the CLI; the data-directory lock
   (one writer per index: a second daemon fails here) and the socket path
   (another daemon answering there, a directory that is not ours);
1. load the model and open the index (on a first start, with the model not built yet, open the
   index with its planned identity and build the model in the background once everything
   below runs: :mod:`memoryd.daemon.model_build`);
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

from memoryd.daemon.api.jobs import Jobs
from memoryd.daemon.api.session import admission
from memoryd.daemon.api.status import DaemonStatus, RootStatus, WatchState, ring_sizes
from memoryd.daemon.assembly import Parts, build_handlers
from memoryd.daemon.datalock import DataDirLock
from memoryd.daemon.exits import EXIT_OK, EXIT_STARTUP
from memoryd.daemon.invocation import memoryd_command
from memoryd.daemon.logs import configure_logging
from memoryd.daemon.memtrim import limit_arenas, trim
from memoryd.daemon.model_build import DeferredEmbedder, ModelBuilder, build_note, first_build_of
from memoryd.daemon.oneshot import ensure_roots, open_index, sweep_of
from memoryd.daemon.private import check_data_dir, set_private_umask
from memoryd.daemon.procstat import rss_bytes, tree_bytes
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.server import SocketServer
from memoryd.daemon.rpc.serving import ServerConfig
from memoryd.daemon.rpc.sockpath import check_socket_path
from memoryd.daemon.sdnotify import SystemdNotifier, listen_fds, watchdog_interval_s
from memoryd.daemon.watch.debouncer import Debouncer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.watch.watcher import Watcher
from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.daemon.work.scheduler import Scheduler
from memoryd.daemon.work.worker import IndexWorker
from memoryd.indexer.access import resolve_target
from memoryd.indexer.config import Config
from memoryd.indexer.embedding.build_plan import BuildPlan
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.errors import DaemonError, MemorydError
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

    def __init__(self, cfg: Config, env: Mapping[str, str], reload: Callable[[], Config] | None = None, *,
                 plan_build: Callable[[Config], BuildPlan | None] | None = None) -> None:
        self.cfg = cfg
        # None: the model loads before the socket opens (warm cache); a plan: it builds in the background
        self._plan_build = plan_build or first_build_of
        self.env = env
        self.version = _version()
        self.started = time.monotonic()
        self._reload = reload
        self.notifier = SystemdNotifier(env)
        self.should_exit = threading.Event()
        self._hup = threading.Event()
        self.roots = RootMap(cfg.effective_roots)
        self.history = History.in_data_dir(cfg.data_dir)  # one instance: it caches what it has parsed
        self.last_failure: str | None = None
        # Made at start-up, in this order; each None until then (shutdown() stops whatever exists).
        self._lock: DataDirLock | None = None
        self.parts: Parts | None = None  # the index, the worker and what the socket methods are built from
        self._closers: tuple[Callable[[], object], ...] = ()  # what the handlers opened, run once the socket closed
        self._observe_status: Callable[[], dict[str, Any]] | None = None  # observe's counters, for status
        self.server: SocketServer | None = None
        self.debouncer: Debouncer | None = None
        self.watcher: Watcher | None = None
        self.scheduler: Scheduler | None = None
        self.deferred: DeferredEmbedder | None = None  # the index's embedder while its model builds
        self._builder: ModelBuilder | None = None

    @property
    def index(self) -> MemoryIndex:
        return self._parts().index

    @property
    def worker(self) -> IndexWorker:
        return self._parts().worker

    def _parts(self) -> Parts:
        if self.parts is None:
            raise DaemonError("the daemon has not opened its index yet (startup() has not got that far)")
        return self.parts

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
        plan = self._plan_build(cfg)
        self.notifier.status("loading the embedding model" if plan is None else "opening the index")
        self.parts = parts = self._open_parts(plan)
        parts.worker.request_reconcile("start-up")
        built = build_handlers(cfg, parts)
        self._closers = built.closers
        self._observe_status = built.observe_status
        srv = cfg.server
        self.server = SocketServer(
            ServerConfig(cfg.socket_path, max_request_bytes=srv.max_request_bytes, max_clients=srv.max_clients,
                         idle_timeout_s=srv.idle_timeout_s, read_timeout_s=srv.read_timeout_s,
                         listen_fd=fds[0] if fds else None),
            admission(built.handlers, srv.allowed_uids),
        )
        self.server.start()
        self.debouncer = Debouncer(parts.worker.submit_changes, quiet_ms=cfg.watch.debounce_ms,
                                   max_delay_ms=cfg.watch.max_delay_ms, settle_ms=cfg.watch.settle_ms)
        self.debouncer.start()
        self.watcher = Watcher(self.roots.roots, parts.path_filter, self.debouncer.submit, self._watch_failed,
                               poll_interval_s=cfg.watch.poll_fallback_s, on_appeared=self._root_appeared)
        self.watcher.start()
        parts.worker.start()
        self.notifier.ready("reconciling")
        self.scheduler = Scheduler(parts.worker, parts.index, cfg.schedule, self._check_watchers)
        self.scheduler.start()
        if plan is not None and self.deferred is not None:  # last: everything above answers meanwhile
            self.notifier.status(build_note("reconciling", self.deferred))
            self._builder = ModelBuilder(self.deferred, plan, cfg.embedding.background_nice, self._model_built)
            self._builder.start()
        me = memoryd_command()  # the venv's path when `memoryd` on PATH is not this one
        log.info("daemon.ready", socket=str(self.server.address), roots=[str(r) for r in self.roots.roots],
                 data_dir=str(cfg.data_dir), model=parts.index.embedder.model_id, pid=os.getpid(),
                 model_state="building in the background" if self._builder is not None else "loaded",
                 startup_s=round(time.monotonic() - self.started, 2),
                 try_search=f"{me} search --socket {self.server.address} \"what did we decide\"",
                 try_status=f"{me} status --socket {self.server.address}")

    def _open_parts(self, plan: BuildPlan | None) -> Parts:
        """Load the model (``plan``: stand in for it while it builds), open the index, make the worker:
        the parts the socket methods are built from. What opened is closed again if a later step fails
        (shutdown() only sees complete parts)."""
        cfg = self.cfg
        path_filter = PathFilter(cfg.watch.include, cfg.watch.exclude)
        self.deferred = deferred = DeferredEmbedder(plan) if plan is not None else None
        index = open_index(cfg, background_rebuilds=True, embedder=deferred)
        embeddings: QueryEmbeddings | None = None
        try:
            trim("model loaded")
            _quiet_faiss_threads()
            embeddings = QueryEmbeddings(index.embedder)
            worker = IndexWorker(index, self.roots, path_filter, path_filter.accept_dir, sweep=sweep_of(index),
                                 on_status=self._worker_status, should_stop=self.should_exit.is_set,
                                 model_ready=(lambda: deferred.ready) if deferred is not None else lambda: True)
        except BaseException:
            if embeddings is not None:
                embeddings.close()
            index.close()
            raise
        return Parts(index=index, worker=worker, roots=lambda: self.roots, path_filter=path_filter,
                     history=self.history, jobs=Jobs(), query_embeddings=embeddings, about=self)

    def _worker_status(self, text: str) -> None:
        """The worker's systemd status line, with the model build's state while there is one."""
        self.notifier.status(build_note(text, self.deferred))

    def _model_built(self, error: str | None) -> None:
        """On the builder's thread: the model is ready (``error`` None) or failed to build. Ready: the
        worker wakes (a task going through) and gives the pending vectors their steps."""
        if self.should_exit.is_set() or self.parts is None:
            return
        if error is None:
            trim("model loaded")
            self.parts.worker.call(lambda: None)
            self.notifier.status(f"watching {len(self.roots.roots)} roots")
        else:
            self.notifier.status(build_note("serving", self.deferred))

    def _check_watchers(self) -> None:
        if self.watcher is not None:
            self.watcher.check()

    def _watch_failed(self, root: Any, reason: str) -> None:
        """The watcher lost events (overflow, observer died): only a full reconcile is safe."""
        self.last_failure = f"{root}: {reason}"
        log.error("watcher.failed", root=str(root), reason=reason, action="observer restarted; full reconcile")
        if self.parts is not None:
            self.parts.worker.request_reconcile(f"watcher failure on {root}")

    def _root_appeared(self, root: Path) -> None:
        """A missing root is there again: not a failure (nothing was lost), but its files need a sweep;
        a watch failure it had is over."""
        if self.last_failure is not None and self.last_failure.startswith(f"{root}: "):
            self.last_failure = None
        if self.parts is not None:
            self.parts.worker.request_reconcile(f"root appeared: {root}")

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
        return self.parts is not None and self.parts.worker.alive

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
        self.watcher = Watcher(roots.roots, self._parts().path_filter, self.debouncer.submit, self._watch_failed,
                               poll_interval_s=new.watch.poll_fallback_s, on_appeared=self._root_appeared)
        self.watcher.start()
        self.worker.request_reconcile("roots changed")
        log.info("config.reloaded", roots_changed=True, roots=[str(r) for r in roots.roots])

    # -- status -----------------------------------------------------------------

    def status(self) -> DaemonStatus:
        parts = self._parts()
        st = parts.index.status()
        watch = self.watcher.status() if self.watcher else {}
        roots = tuple(RootStatus(str(r), WatchState.from_watcher(w) if (w := watch.get(str(r))) else None)
                      for r in self.roots.roots)
        pending = parts.worker.pending + (self.debouncer.pending_count if self.debouncer else 0)
        # Keyword first: a sweep is not over while its chunks still wait for vectors (whoever waits
        # for "not reconciling" gets full hybrid quality; keyword search already covers them).
        reconciling = parts.worker.reconciling or st.vectors.pending > 0
        return DaemonStatus(
            version=self.version, pid=os.getpid(), uptime_s=round(time.monotonic() - self.started, 3), index=st,
            pending=pending, reconciling=reconciling, reconcile_progress=parts.worker.reconcile_progress, roots=roots,
            reconcile=parts.worker.reconcile_status(), last_reconcile=_iso(parts.worker.last_reconcile),
            last_error=parts.worker.last_error, last_watch_failure=self.last_failure,
            socket=str(self.cfg.socket_path), data_dir=str(self.cfg.data_dir),
            debounced=self.debouncer.ready_counts if self.debouncer else {},
            data_dir_bytes=tree_bytes(self.cfg.data_dir), rss_bytes=rss_bytes(),
            jobs=parts.jobs.snapshot(), history=ring_sizes(self.history.sizes()),
            observe=self._observe_status() if self._observe_status is not None else None,
            model_build=self.deferred.state() if self.deferred is not None else None,
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
        parts = self.parts
        if parts is not None and not parts.worker.stop(timeout=max(0.5, budget)):
            log.warning("shutdown.worker_busy", action="exiting without waiting; the next start reconciles")
        if self.server is not None:
            self.server.stop(timeout=SERVER_STOP_S)
        for close in self._closers:
            close()
        if parts is not None:
            if parts.query_embeddings is not None:
                parts.query_embeddings.close()
            if not parts.worker.alive:
                parts.index.close()
        if self._lock is not None:
            self._lock.release()
        log.info("daemon.stopped", uptime_s=round(time.monotonic() - self.started, 1))


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
