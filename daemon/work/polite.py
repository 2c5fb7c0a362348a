"""Polite embedding: bulk passage batches at low CPU priority, on their own model session.

Measured on 2 cores (docs/scaling.md, "Polite embedding"): while a re-index
embedded passages on the same onnxruntime session as queries, a query's
embedding shared the session's intra-op thread pool with 16-passage batches
and its p50 went from ~13 to ~60 ms. Two facts shape the fix:

* onnxruntime creates a session's pool threads when the session is created,
  and a Linux thread inherits the nice value of the thread that creates it;
* an unprivileged thread can raise its nice value but never lower it again.

So bulk batches go to one dedicated thread that first lowers its own priority
and then opens its own session (:meth:`OnnxEmbedder.with_own_session`): every
thread computing bulk passages is niced, and the query session's pool is never
busy with them. That session (~30 MB beside the shared word table, plus up to
~250 MB of activations while a batch runs) is dropped after ``IDLE_RELEASE_S``
without bulk work, and the freed heap handed back to the kernel
(:func:`memoryd.daemon.memtrim.trim`): after a bulk re-index the daemon returns to its
idle size.

Small calls — at most one model batch, e.g. a single edited file or a
``remember`` — stay on the caller's thread and session: a busy machine must not
make a write wait behind the user's other work (``write.wait_s``). Their speed is
measured (:meth:`PoliteEmbedder.passages_per_s`): the worker embeds a batch before
committing it only when that fits a small time budget, and commits anything larger
keyword first. The vector backlog embeds through :meth:`PoliteEmbedder.background`,
which sends even small slices to the low-priority thread: backlog slices are kept
small so that a save never waits long behind one, and they must stay polite.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.daemon.memtrim import trim
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.types import Embedder

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray

log = structlog.get_logger(__name__)

IDLE_RELEASE_S = 30.0  # drop the bulk session after this long without bulk work (re-opening costs ~0.3 s)
RATE_CALLS = 8  # the inline rate is measured over this many recent calls
_STOP = object()


def lower_priority(nice: int, what: str) -> bool:
    """Add ``nice`` to the calling thread's nice value (Linux: per thread); False if not possible.

    Elsewhere ``setpriority(PRIO_PROCESS, tid)`` would renice the whole process, so it is skipped.
    """
    if nice <= 0:
        return False
    if not sys.platform.startswith("linux"):
        log.info("priority.unchanged", thread=what, reason=f"per-thread priority needs Linux, not {sys.platform}")
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as exc:
        log.warning("priority.unchanged", thread=what, error=str(exc))
        return False
    return True


class PoliteEmbedder:
    """An :class:`~memoryd.indexer.types.Embedder` for the index worker: bulk passages go to a low-priority thread.

    ``nice`` 0 turns it into a plain pass-through. Calls with more than ``small`` texts
    are bulk. :meth:`start` / :meth:`stop` own the thread; before ``start`` and after
    ``stop`` every call runs inline.
    """

    def __init__(self, inner: Embedder, nice: int, small: int = 16) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._nice = nice
        self._small = small
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # no job is queued behind the stop sentinel
        self.bulk_batches = 0  # handed to the thread (status, tests)
        self._inline: deque[tuple[int, float]] = deque(maxlen=RATE_CALLS)  # (texts, seconds) per inline call

    @property
    def small(self) -> int:
        """The most texts a call may hold and still run inline (one model batch)."""
        return self._small

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_query(self, text: str) -> FloatArray:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        """Same contract as the inner embedder's; bulk calls block until the low-priority thread answers."""
        return self._embed(texts, background=False)

    def background(self) -> Embedder:
        """This embedder as the vector backlog uses it: every passage call, however small, runs on
        the low-priority thread (inline only before :meth:`start` or with ``nice`` 0)."""
        return _Background(self)

    def passages_per_s(self) -> float | None:
        """Passages per second of the recent inline calls (the synchronous path); None before any."""
        texts = sum(n for n, _ in self._inline)
        seconds = sum(s for _, s in self._inline)
        return texts / seconds if texts and seconds > 0 else None

    def _embed(self, texts: Sequence[str], background: bool) -> FloatArray:
        done: Future[FloatArray] = Future()
        with self._lock:
            thread = self._thread
            bulk = (background or len(texts) > self._small) and thread is not None and thread.is_alive()
            if bulk:
                self.bulk_batches += 1
                self._jobs.put((list(texts), done))
        if bulk:
            return done.result()
        t0 = time.perf_counter()
        out = self.inner.embed_passages(texts)
        if texts:
            self._inline.append((len(texts), time.perf_counter() - t0))
        return out

    def start(self) -> None:
        if self._nice > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="memoryd-embed-bulk", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Finish the batch in hand, then end the thread; True if it ended within ``timeout``."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return True
            self._jobs.put(_STOP)
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        lower_priority(self._nice, "embed-bulk")
        twin: Embedder | None = None
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_RELEASE_S)
            except queue.Empty:
                if twin is not None:
                    twin = None  # its threads end and its memory goes back
                    trim("bulk session released")
                    log.info("model.bulk_session_released", idle_s=IDLE_RELEASE_S)
                continue
            if job is _STOP:
                return
            texts, done = job
            if twin is None:
                twin = self._open_twin()
            try:
                done.set_result(twin.embed_passages(texts))
            except BaseException as exc:  # re-raised on the worker's thread, where the task fails
                done.set_exception(exc)

    def _open_twin(self) -> Embedder:
        """The inner embedder on a session opened by this (low-priority) thread, else the inner one."""
        factory = getattr(self.inner, "with_own_session", None)
        if factory is None:
            return self.inner
        try:
            twin: Embedder = factory()
        except MemorydError as exc:
            log.warning("model.bulk_session_failed", error=str(exc), action="bulk passages share the query session")
            return self.inner
        log.info("model.bulk_session_opened", nice=self._nice)
        return twin


class _Background:
    """A :class:`PoliteEmbedder` whose passage calls all go to its low-priority thread."""

    def __init__(self, polite: PoliteEmbedder) -> None:
        self._polite = polite
        self.model_id = polite.model_id
        self.dimension = polite.dimension

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._polite.count_tokens(texts)

    def embed_query(self, text: str) -> FloatArray:
        return self._polite.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return self._polite._embed(texts, background=True)
