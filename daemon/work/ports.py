"""The index as the daemon's work side drives it: :class:`WritableIndex`.

The worker, its idle steps, the rebuilder and the scheduler call these methods and read these
few views, and nothing else of the engine: no attribute set two levels deep, no concrete class.
:class:`memoryd.indexer.engine.MemoryIndex` (and its PostgreSQL subclass) is one, checked by mypy
where the daemon hands its index over (:mod:`memoryd.daemon.app`). The one place that still needs
the whole engine is the reconcile, a library function over the index
(:func:`memoryd.indexer.ingestion.reconcile.reconcile`): the worker is handed it bound to the index,
as a :class:`Sweep`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.fill.backlog import VectorBacklog
    from memoryd.indexer.fill.line_vectors import FillResult, LineVectorFill
    from memoryd.indexer.ingestion.indexstats import IndexStats, Progress
    from memoryd.indexer.storage.base import LineStore, VectorStore
    from memoryd.indexer.storage.base import RebuildJob as Rebuild
    from memoryd.indexer.types import Embedder


Accept = Callable[[str], bool]


class Sweep(Protocol):
    """A reconcile of the index against ``roots`` (the library's ``reconcile`` bound to the index: the
    composition root makes it, :func:`memoryd.daemon.oneshot.sweep_of`)."""

    def __call__(self, roots: Sequence[Path], accept: Accept, accept_dir: Accept | None = None,
                 progress: Progress | None = None, defer_at: int | None = None) -> IndexStats: ...


class WritableIndex(Protocol):
    """What ``daemon/work`` calls on the index: writes, the idle-time fills, saves, rebuilds."""

    @property
    def cfg(self) -> Config: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def backlog(self) -> VectorBacklog:
        """The chunks still without a vector (its size, progress and rate meter)."""
        ...

    @property
    def line_fill(self) -> LineVectorFill | None: ...

    @property
    def vectors(self) -> VectorStore: ...

    def index_files(self, items: Sequence[tuple[Path, str]], progress: Progress | None = None,
                    defer_at: int | None = None) -> IndexStats: ...

    def remove_file(self, root: Path, rel: str) -> int: ...

    def move_file(self, root: Path, rel: str, dest_root: Path, dest_rel: str) -> bool: ...

    def fill_vectors(self, limit: int = ..., should_yield: Callable[[], bool] | None = None) -> int: ...

    def fill_line_vectors(self, max_lines: int = ..., should_yield: Callable[[], bool] | None = None
                          ) -> FillResult: ...

    def lines_pending(self) -> bool: ...

    def open_line_store(self) -> LineStore | None: ...

    def set_passage_embedder(self, embedder: Embedder) -> None: ...

    def set_backlog_embedder(self, embedder: Embedder | None) -> None: ...

    def set_backlog_slice(self, size: int) -> None: ...

    def promote_backlog(self, files: Sequence[tuple[Path, str]]) -> int: ...

    def set_background_rebuilds(self, on: bool = True) -> None: ...

    def save(self, force: bool = False) -> bool: ...

    def maintain(self) -> dict[str, Any]: ...

    def take_reconcile_wanted(self) -> bool: ...

    def rebuild_wanted(self) -> bool: ...

    def start_rebuild(self) -> Rebuild | None: ...

    def finish_rebuild(self, job: Rebuild) -> bool: ...

    def cancel_rebuild(self, job: Rebuild) -> None: ...
