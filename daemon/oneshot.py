"""One-shot, in-process commands: ``memoryd index``, and the index opening ``--offline`` reads share.

They open the index directly (no daemon). ``index`` takes the index's write
side; ``search --offline`` and ``context --offline`` (:mod:`memoryd.daemon.offline_read`: the
socket's read handlers, in-process) open it read-only, so they work beside a running daemon
without taking any lock from it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.indexer.config import Config
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.ingestion.indexstats import IndexStats, Progress

if TYPE_CHECKING:
    from memoryd.daemon.work.ports import Accept, Sweep
    from memoryd.indexer.types import Embedder


def sweep_of(index: MemoryIndex) -> Sweep:
    """The reconcile of ``index`` (:func:`memoryd.indexer.ingestion.reconcile.reconcile` bound to it): what
    the index worker sweeps with, so that the work side needs no more of the engine than its protocol."""
    from memoryd.indexer.ingestion.reconcile import reconcile

    def sweep(roots: Sequence[Path], accept: Accept, accept_dir: Accept | None = None,
              progress: Progress | None = None, defer_at: int | None = None) -> IndexStats:
        return reconcile(index, roots, accept, accept_dir, progress, defer_at)

    return sweep


def open_index(cfg: Config, read_only: bool = False, background_rebuilds: bool = False,
               embedder: Embedder | None = None) -> MemoryIndex:
    """Load the embedder and open the index (slow: loads the model).

    ``background_rebuilds``: an index-structure switch already due at open is
    left to the daemon's background rebuilder instead of delaying start-up.
    ``embedder``: this one instead of loading the configured one (the daemon's stand-in while the
    model builds, :mod:`memoryd.daemon.model_build`).
    """
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.embedding.model_cache import remove_legacy_models

    if not read_only:
        remove_legacy_models(cfg.data_dir, cfg.model_cache_dir)
    from memoryd.daemon.log_redaction import protect

    protect(cfg.embedding_api_key)  # by value, from every log line of this process (see log_redaction)
    if embedder is None:
        embedder = load_embedder(cfg.embedding, cfg.model_cache_dir, cfg.embedding_api_key)
    from memoryd.indexer import engine

    return engine.open_index(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)


def run_index(cfg: Config, as_json: bool = False) -> int:
    """Reconcile every root once, with progress bars on a TTY, and print a summary line.

    Keyword first, as the daemon does on a cold folder: every file is read, chunked and
    committed (one bar over files, seconds), then the chunks still without a vector are
    embedded (a second bar over chunks, with rate and ETA): interrupted, the run keeps
    every file searchable by keyword and the next run or daemon embeds only the rest.
    """
    from memoryd.daemon.datalock import DataDirLock
    from memoryd.daemon.logs import configure_logging

    configure_logging(cfg.log.level, cfg.log.format)
    t0 = time.perf_counter()
    roots = ensure_roots(cfg)
    lock = DataDirLock(cfg.data_dir)
    lock.acquire()
    try:
        return _index_locked(cfg, roots, t0, as_json)
    finally:
        lock.release()


def _index_locked(cfg: Config, roots: list[Path], t0: float, as_json: bool = False) -> int:
    from memoryd.daemon.watch.pathfilter import PathFilter
    from memoryd.indexer.ingestion.reconcile import reconcile

    index = open_index(cfg)
    path_filter = PathFilter(cfg.watch.include, cfg.watch.exclude)
    tty = sys.stderr.isatty()
    try:
        with _Bar("reading", "file", tty) as bar:
            stats = reconcile(index, roots, path_filter, path_filter.accept_dir, progress=bar.files, defer_at=0)
        t_embed, waiting = time.perf_counter(), len(index.backlog)
        with _Bar("embedding", "chunk", tty, total=waiting) as bar:
            meter = _Meter(index, tty)
            while index.backlog:
                stats.embedded += index.fill_vectors(
                    should_yield=lambda: bar.chunks(len(index.backlog)) or meter.tick())
                bar.chunks(len(index.backlog))
        if waiting:
            seconds = time.perf_counter() - t_embed
            _log_vectors_done(provider=cfg.embedding.provider, vectors=waiting - len(index.backlog),
                         seconds=round(seconds, 1), per_s=round((waiting - len(index.backlog)) / max(seconds, 1e-9), 2))
        index.save()
        _fill_lines(index, tty)
        totals = index.store.counts()
    finally:
        index.close()
    seconds = time.perf_counter() - t0
    print(summary_json(stats, seconds, totals) if as_json else summary_line(stats, seconds, totals))
    return 0


def _fill_lines(index: MemoryIndex, tty: bool) -> None:
    """The chunks' line vectors (what the daemon embeds when idle), a third bar over chunks; an
    interrupted run leaves the rest to the next run or the daemon, and the search ranks as before
    until they are all there."""
    fill = index.line_fill
    if fill is None or not index.lines_pending():
        return
    t0, waiting = time.perf_counter(), fill.count()
    lines = 0
    with _Bar("line vectors", "chunk", tty, total=waiting) as bar:
        left = waiting
        while index.lines_pending():
            done = index.fill_line_vectors()
            lines += done.embedded
            left -= done.chunks
            bar.chunks(left)
    if waiting:
        import structlog

        structlog.get_logger(__name__).info("index.lines_done", chunks=waiting, lines_embedded=lines,
                                            seconds=round(time.perf_counter() - t0, 1))


def summary_json(stats: IndexStats, seconds: float, totals: tuple[int, int]) -> str:
    """:func:`summary_line` for a script (``memoryd index --json``): the same figures, one JSON object."""
    import dataclasses
    import json

    run = {k: v for k, v in dataclasses.asdict(stats).items() if k != "seconds"}
    return json.dumps({"files": totals[0], "chunks": totals[1], "run": run, "seconds": round(seconds, 3)},
                      ensure_ascii=False)


def summary_line(stats: IndexStats, seconds: float, totals: tuple[int, int]) -> str:
    """One line: what this run did, and what the index now holds."""
    return (f"index: {totals[0]} files, {totals[1]} chunks. This run: "
            f"indexed {stats.files_indexed} files ({stats.chunks_added} new chunks), "
            f"{stats.files_unchanged} unchanged, {stats.files_removed} removed, {stats.files_skipped} skipped; "
            f"embedded {stats.embedded}, cache hits {stats.cache_hits}; {seconds:.1f} s")


PROGRESS_EVERY_S = 10.0  # without a terminal (no bar), how often `memoryd index` logs its progress


def _log_vectors_done(**fields: Any) -> None:
    import structlog

    structlog.get_logger(__name__).info("index.vectors_done", **fields)


class _Meter:
    """Without a terminal: ``index.progress`` (vectors pending, chunks/s, time left, whichever provider
    embeds) every :data:`PROGRESS_EVERY_S`; on a terminal the bar shows the same. ``tick`` returns False
    (a backlog step's "go on")."""

    def __init__(self, index: MemoryIndex, tty: bool) -> None:
        self._index, self._tty = index, tty
        self._next = time.monotonic() + PROGRESS_EVERY_S

    def tick(self) -> bool:
        if not self._tty and time.monotonic() >= self._next:
            import structlog

            self._next = time.monotonic() + PROGRESS_EVERY_S
            structlog.get_logger(__name__).info("index.progress", provider=self._index.cfg.embedding.provider,
                                                **self._index.backlog.progress())
        return False


class _Bar:
    """A tqdm bar on a TTY (a no-op elsewhere); log lines go through it while it is open.

    tqdm's own rate and ETA are right from the first update because each bar counts one
    kind of work: files read, then chunks embedded (counted per model slice).
    """

    def __init__(self, what: str, unit: str, tty: bool, total: int = 0) -> None:
        self._what, self._unit, self._tty, self._total = what, unit, tty, total
        self._bar: Any = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> _Bar:
        if self._tty and (self._unit == "file" or self._total):
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, desc=self._what, unit=self._unit, dynamic_ncols=True,
                             file=_raw_stderr())
            self._stack.enter_context(_logs_through_bar())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        self._stack.close()

    def files(self, done: int, total: int, stats: IndexStats) -> None:
        if self._bar is None:
            return
        if self._bar.total != total:
            self._bar.total = total
        self._bar.set_postfix(chunks=stats.chunks_added + stats.chunks_kept, refresh=False)
        self._bar.update(done - self._bar.n)

    def chunks(self, pending: int) -> bool:
        """Show ``pending`` chunks left; returns False (a backlog step's "go on")."""
        if self._bar is not None:
            self._bar.update(max(0, self._total - pending - self._bar.n))
        return False


def _raw_stderr() -> Any:
    """The terminal under the CLI's escaping wrapper: the bar draws with ``\\r``, which the wrapper
    spells out (the bar shows only numbers and fixed words)."""
    return getattr(sys.stderr, "inner", sys.stderr)


class _BarStream:
    """A text stream that clears the bars, writes a log line through ``target``, and redraws them:
    a log line above the bar, never inside it."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def write(self, text: str) -> int:
        from tqdm import tqdm

        with tqdm.external_write_mode(file=_raw_stderr()):
            self._target.write(text)
            self._target.flush()
        return len(text)

    def flush(self) -> None:
        self._target.flush()


@contextlib.contextmanager
def _logs_through_bar() -> Iterator[None]:
    """Point the log handlers that write to stderr at :class:`_BarStream` for the bar's lifetime."""
    swapped = [(h, h.stream) for h in logging.getLogger().handlers
               if isinstance(h, logging.StreamHandler) and h.stream in (sys.stderr, _raw_stderr())]
    for h, stream in swapped:
        h.setStream(_BarStream(stream))
    try:
        yield
    finally:
        for h, stream in swapped:
            h.setStream(stream)


def ensure_roots(cfg: Config) -> list[Path]:
    """The roots to index; the built-in default root is created with an example note."""
    roots = list(cfg.effective_roots)
    if not cfg.watch.roots:
        from memoryd.daemon.defaults import ensure_default_root

        ensure_default_root(cfg.default_root)
    return roots

