"""The idle-time file-abstract job (issue #40, item 4): a few abstracts per step while nothing else runs.

Why its own thread and not a worker step: an abstract is a model call of seconds, on a server that
may be remote; the index worker must never wait on it. The job wakes every ``interval_s``, does
nothing while the worker has files queued or a sweep runs (``busy``), and otherwise abstracts at most
``per_step`` files that have none yet (:func:`memoryd.indexer.search.abstracts.refresh_step`). A file
already seen unchanged (same size and mtime) is not read again. The text abstracted is the file as
the index stores it (redacted at ``write.redact_index``), so no secret reaches the model, and the
context method looks abstracts up by that same text (:meth:`memoryd.daemon.api.read.ReadMethods`).

It runs only when the daemon holds a model (``Daemon.llm``); without one there is nothing to make.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

from memoryd.daemon.roots import RootMap
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.ingestion.files import read_memory_file, walk_root
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore, refresh_step

log = structlog.get_logger("memoryd")

INTERVAL_S = 30.0
PER_STEP = 2


def open_store(data_dir: Path, enabled: bool) -> AbstractStore | None:
    """The data dir's abstract store when a model is configured (``enabled``); None otherwise."""
    return AbstractStore(data_dir / STORE_NAME) if enabled else None


class AbstractJob:
    def __init__(self, *, model: JsonModel, store: AbstractStore, roots: Callable[[], RootMap],
                 path_filter: PathFilter, max_file_bytes: int, redact_level: str, busy: Callable[[], bool],
                 interval_s: float = INTERVAL_S, per_step: int = PER_STEP) -> None:
        self._model, self._store, self._roots = model, store, roots
        self._filter, self._max_bytes, self._level = path_filter, max_file_bytes, redact_level
        self._busy, self._interval, self._per_step = busy, interval_s, per_step
        self._seen: dict[tuple[str, str], tuple[int, int]] = {}  # (root, rel) → (size, mtime_ns) abstracted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="memoryd-abstracts", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait up to ``timeout``. A model call in flight is not interrupted:
        its answer arrives after the store closed and is dropped there (:class:`AbstractStore`), and
        no further file is read or sent once the stop is asked."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def step(self) -> int:
        """One step: abstracts made (0 while the worker is busy)."""
        if self._busy():
            return 0
        made = refresh_step(self._files(), self._store, self._model, self._per_step)
        if made:
            log.info("abstracts.made", files=made, stored=len(self._store))
        return made

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.step()
            except Exception:  # an extra, never worth the daemon: logged, tried again next time
                log.exception("abstracts.step_error")

    def _files(self) -> Iterator[tuple[str, str]]:
        for root in self._roots().roots:
            for rel, st in walk_root(root, self._filter, self._filter.accept_dir):
                if self._stop.is_set():  # shutting down: no new model call
                    return
                if st is None:
                    continue
                key, stamp = (str(root), rel), (st.st_size, st.st_mtime_ns)
                if self._seen.get(key) == stamp:
                    continue
                try:
                    text = read_memory_file(root / rel, root, self._max_bytes).text
                except (FileSkipped, OSError):
                    continue
                yield rel, privacy.redact(text, self._level)
                # resumed only when the next file is asked for: this one was abstracted or found cached
                # (a step that stopped at its limit or at a failure never resumes, so the file is tried again)
                self._seen[key] = stamp
