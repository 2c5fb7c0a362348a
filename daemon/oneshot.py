"""One-shot, in-process commands: ``memoryd index`` and ``memoryd search --offline``.

They open the index directly (no daemon). ``index`` takes the index's write
side; ``search --offline`` opens it read-only, so it works beside a running
daemon without taking any lock from it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from memoryd.indexer.config import Config
from memoryd.indexer.engine import IndexStats, MemoryIndex


def open_index(cfg: Config, read_only: bool = False, background_rebuilds: bool = False) -> MemoryIndex:
    """Load the embedder and open the index (slow: loads the model).

    ``background_rebuilds``: an index-structure switch already due at open is
    left to the daemon's background rebuilder instead of delaying start-up.
    """
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.embedding.model_cache import remove_legacy_models

    if not read_only:
        remove_legacy_models(cfg.data_dir, cfg.model_cache_dir)
    embedder = load_embedder(cfg.embedding, cfg.model_cache_dir)
    from memoryd.indexer.storage import open_index as open_backend

    return open_backend(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)


def run_index(cfg: Config) -> int:
    """Reconcile every root once, with a progress bar on a TTY, and print a summary line."""
    from memoryd.daemon.datalock import DataDirLock
    from memoryd.daemon.logs import configure_logging

    configure_logging(cfg.log.level, cfg.log.format)
    t0 = time.perf_counter()
    roots = ensure_roots(cfg)
    lock = DataDirLock(cfg.data_dir)
    lock.acquire()
    try:
        return _index_locked(cfg, roots, t0)
    finally:
        lock.release()


def _index_locked(cfg: Config, roots: list[Path], t0: float) -> int:
    from memoryd.daemon.watch.pathfilter import PathFilter
    from memoryd.indexer.reconcile import reconcile

    index = open_index(cfg)
    path_filter = PathFilter(cfg.watch.include, cfg.watch.exclude)
    bar = _progress_bar()
    try:
        stats = reconcile(index, roots, path_filter, path_filter.accept_dir, progress=bar.update if bar else None)
        totals = index.store.counts()
    finally:
        if bar:
            bar.close()
        index.close()
    print(summary_line(stats, time.perf_counter() - t0, totals))
    return 0


def summary_line(stats: IndexStats, seconds: float, totals: tuple[int, int]) -> str:
    """One line: what this run did, and what the index now holds."""
    return (f"index: {totals[0]} files, {totals[1]} chunks. This run: "
            f"indexed {stats.files_indexed} files ({stats.chunks_added} new chunks), "
            f"{stats.files_unchanged} unchanged, {stats.files_removed} removed, {stats.files_skipped} skipped; "
            f"embedded {stats.embedded}, cache hits {stats.cache_hits}; {seconds:.1f} s")


class _Bar:
    """tqdm over files, showing chunks and chunks/s as it goes."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=0, unit="file", dynamic_ncols=True, file=sys.stderr)
        self._t0 = time.perf_counter()

    def update(self, done: int, total: int, stats: IndexStats) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        rate = stats.embedded / max(1e-6, time.perf_counter() - self._t0)
        self._bar.set_postfix(chunks=stats.chunks_added + stats.chunks_kept, emb_per_s=f"{rate:.1f}", refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


def _progress_bar() -> _Bar | None:
    return _Bar() if sys.stderr.isatty() else None


def ensure_roots(cfg: Config) -> list[Path]:
    """The roots to index; the built-in default root is created with an example note."""
    roots = list(cfg.effective_roots)
    if not cfg.watch.roots:
        from memoryd.daemon.defaults import ensure_default_root

        ensure_default_root(cfg.default_root)
    return roots


def offline_search(cfg: Config, params: dict[str, Any]) -> dict[str, Any]:
    """Search an index in-process, read-only; logs only warnings (stdout is for the result)."""
    from memoryd.daemon.logs import configure_logging

    level = cfg.log.level if cfg.log.level in ("warning", "error") else "warning"
    configure_logging(level, cfg.log.format)
    index = open_index(cfg, read_only=True)
    try:
        query = params.pop("query")
        return index.search(query, **params).to_json()
    finally:
        index.close()
