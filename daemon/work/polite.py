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
keyword first.

The vector backlog embeds through :meth:`PoliteEmbedder.background`, which sends even
small slices to the low-priority thread and waits for them *interruptibly*: when a
task reaches the worker (a save) the wait ends with :class:`SliceAbandoned`, the
backlog step puts its chunks back, and the worker serves the save at once instead of
waiting for a niced slice that a busy machine may starve. The abandoned slice is not
lost: the low-priority thread finishes it (or drops it if it had not started) and its
vectors are kept (``SALVAGE_TEXTS``) for the next step that asks for the same texts.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from memoryd.daemon.memtrim import trim
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.types import Embedder

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray

log = structlog.get_logger(__name__)

IDLE_RELEASE_S = 30.0  # drop the bulk session after this long without bulk work (re-opening costs ~0.3 s)
RATE_CALLS = 8  # the inline rate is measured over this many recent calls
POLL_S = 0.02  # how often an interruptible wait asks whether to give up
SALVAGE_TEXTS = 512  # vectors of abandoned slices kept for the next ask (~1 MB of text and vectors at most)
_STOP = object()


class SliceAbandoned(Exception):
    """A background embedding wait given up because the caller has other work (the slice goes on)."""


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
        self._salvage: OrderedDict[str, Any] = OrderedDict()  # text -> vector, from abandoned slices
        self.abandoned = 0  # background waits given up (tests, logs)

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

    def background(self, interrupt: Callable[[], bool] = lambda: False) -> Embedder:
        """This embedder as the vector backlog uses it: every passage call, however small, runs on
        the low-priority thread (inline only before :meth:`start` or with ``nice`` 0), and its wait
        raises :class:`SliceAbandoned` as soon as ``interrupt()`` is true."""
        return _Background(self, interrupt)

    def passages_per_s(self) -> float | None:
        """Passages per second of the recent inline calls (the synchronous path); None before any."""
        texts = sum(n for n, _ in self._inline)
        seconds = sum(s for _, s in self._inline)
        return texts / seconds if texts and seconds > 0 else None

    def _embed(self, texts: Sequence[str], background: bool) -> FloatArray:
        done = self._submit(texts) if background or len(texts) > self._small else None
        return done.result() if done is not None else self._inline_embed(texts)

    def _submit(self, texts: Sequence[str]) -> Future[FloatArray] | None:
        """Hand ``texts`` to the low-priority thread; None when it is not running (embed inline)."""
        done: Future[FloatArray] = Future()
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                return None
            self.bulk_batches += 1
            self._jobs.put((list(texts), done))
        return done

    def _abandon(self, texts: list[str], done: Future[FloatArray]) -> None:
        """Stop waiting for ``done``: dropped if not started, else its vectors are kept when it ends."""
        self.abandoned += 1
        if not done.cancel():
            done.add_done_callback(lambda f: self._keep(texts, f))

    def _keep(self, texts: list[str], done: Future[FloatArray]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        with self._lock:
            for text, vector in zip(texts, done.result(), strict=True):
                self._salvage[text] = vector
            while len(self._salvage) > SALVAGE_TEXTS:
                self._salvage.popitem(last=False)

    def _salvaged(self, texts: Sequence[str]) -> dict[str, Any]:
        """The kept vectors of these texts (each is used once)."""
        with self._lock:
            return {t: self._salvage.pop(t) for t in set(texts) if t in self._salvage}

    def _inline_embed(self, texts: Sequence[str]) -> FloatArray:
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
                    release = getattr(self.inner, "release_pages", None)  # the word table's pages bulk work touched
                    dropped = release() if callable(release) else 0
                    trim("bulk session released")
                    log.info("model.bulk_session_released", idle_s=IDLE_RELEASE_S, table_mb_advised=dropped >> 20)
                continue
            if job is _STOP:
                return
            texts, done = job
            if not done.set_running_or_notify_cancel():
                continue  # abandoned before it started
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
    """A :class:`PoliteEmbedder` whose passage calls all go to its low-priority thread, waited for
    interruptibly, and answered from salvaged vectors where an abandoned slice already has them."""

    def __init__(self, polite: PoliteEmbedder, interrupt: Callable[[], bool]) -> None:
        self._polite = polite
        self._interrupt = interrupt
        self.model_id = polite.model_id
        self.dimension = polite.dimension

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._polite.count_tokens(texts)

    def embed_query(self, text: str) -> FloatArray:
        return self._polite.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        """Raises :class:`SliceAbandoned` when ``interrupt()`` turns true before the thread answers."""
        polite = self._polite
        known = polite._salvaged(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            done = polite._submit(missing)
            mat = polite._inline_embed(missing) if done is None else self._wait(missing, done)
            known.update(zip(missing, mat, strict=True))
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False) if texts else \
            np.zeros((0, self.dimension), dtype=np.float32)

    def _wait(self, texts: list[str], done: Future[FloatArray]) -> FloatArray:
        while True:
            try:
                return done.result(timeout=POLL_S)
            except FutureTimeout:
                if self._interrupt():
                    self._polite._abandon(texts, done)
                    raise SliceAbandoned(f"{len(texts)} passages left to the background thread") from None
