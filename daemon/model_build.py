"""The first start's model build in the background: the socket answers before the model exists.

When the model cache lacks the default model (:func:`memoryd.indexer.embedding.build_plan.plan_first_build`),
the daemon opens the index with a :class:`DeferredEmbedder` (the planned model id, width and token
counts) and starts the socket, the watchers and the worker at once; :class:`ModelBuilder` builds the
model on a thread of its own and hands it over. Meanwhile everything that needs no model answers
as usual (status, get, files, keyword search, writes), and what needs one gets
:class:`ModelBuilding`, a :class:`~memoryd.indexer.errors.ProviderUnavailable`, so it takes the
paths an embedding server that is down already takes:

* hybrid and vector searches answer from the keyword leg, ``degraded`` saying why ("keyword
  results only: the embedding model is building (first start, ~10 s)");
* indexing commits chunks keyword first, their vectors pending; the worker gives the backlog no step
  until the model is ready (``model_ready``), then it fills as after any keyword-first sweep;
* ``remember`` does not wait: the memory is written at once, compared with its target file by text
  only (:func:`memoryd.indexer.write.candidates.embed_entries`: a restatement of the very text
  reinforces, nothing is replaced or reinforced on resemblance), and embedded once the model is ready.
  Waiting instead would hold the index worker, and every write behind it, for the whole build.

A build that fails is logged (``model.build_failed``) and shown in ``status`` and ``doctor``; the
daemon goes on serving keywords, and the next start tries again. The builder runs the build child at
``embedding.background_nice`` (it inherits the niced thread's priority) and loads the sessions on a
thread of normal priority: a session's threads keep the priority of the thread that made them, and
the query session must not be niced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.daemon.work.polite import lower_priority
from memoryd.indexer.errors import DaemonError, MemorydError, ModelError, ProviderUnavailable

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.embedding.build_plan import BuildPlan
    from memoryd.indexer.types import Embedder, FloatArray

log = structlog.get_logger(__name__)


class ModelBuilding(ProviderUnavailable):
    """The embedding model is not there yet (building on a first start) or failed to build: the
    keyword leg answers, vectors wait."""


class DeferredEmbedder:
    """The index's embedder while its model builds: the plan's identity and token counts now, the
    built embedder's vectors (and every other attribute) once :meth:`provide` has it."""

    def __init__(self, plan: BuildPlan, clock: Callable[[], float] = time.monotonic) -> None:
        self.model_id = plan.model_id
        self.dimension = plan.dimension
        self._expected_s, self._queries, self._passages = plan.expected_s, plan.queries, plan.passages
        self._count: Callable[[Sequence[str]], list[int]] | None = plan.count_tokens  # dropped once built
        self._clock = clock
        self._since = clock()
        self._inner: Embedder | None = None
        self._error: str | None = None

    # -- the Embedder protocol --------------------------------------------------

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        inner, count = self._inner, self._count
        if inner is not None or count is None:  # count is None only once inner is set
            return self._model().count_tokens(texts)
        return count(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return self._model().embed_passages(texts)

    def embed_query(self, text: str) -> FloatArray:
        return self._model().embed_query(text)

    @property
    def query_precision(self) -> str:
        return str(getattr(self._inner, "query_precision", self._queries))

    @property
    def passage_precision(self) -> str:
        return str(getattr(self._inner, "passage_precision", self._passages))

    def __getattr__(self, name: str) -> Any:
        """What else the built embedder has (``with_own_session``, ``release_pages`` …); nothing before."""
        inner = self.__dict__.get("_inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    # -- the build's state --------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._inner is not None

    def provide(self, embedder: Embedder) -> None:
        """The built embedder; ModelError (and nothing changes) when it is not the model the index opened with."""
        if (embedder.model_id, embedder.dimension) != (self.model_id, self.dimension):
            raise ModelError(f"the model built is {embedder.model_id} ({embedder.dimension}-d), not the "
                             f"{self.model_id} ({self.dimension}-d) this index opened with (an int8 twin that could "
                             f"not be built? see model.query_fallback); the next start loads it as the index's model")
        self._inner = embedder
        self._count = None  # the plan's own tokenizer: the model's counts the same

    def fail(self, error: str) -> None:
        self._error = error

    @property
    def unavailable(self) -> str | None:
        """Why there is no model (None once it is there): a write's ``index_note`` says it."""
        return None if self._inner is not None else self.waiting_reason()

    def waiting_reason(self) -> str:
        """Why there are no vectors yet, in the words status, a search's ``degraded`` and logs use."""
        if self._error is not None:
            return f"the embedding model failed to build: {self._error}"
        return f"the embedding model is building (first start, ~{self._expected_s:.0f} s)"

    def state(self) -> dict[str, Any] | None:
        """``status``'s ``model_build``: None once the model is ready."""
        if self._inner is not None:
            return None
        out: dict[str, Any] = {"state": "failed" if self._error is not None else "building",
                               "detail": self.waiting_reason(), "expected_s": self._expected_s,
                               "elapsed_s": round(self._clock() - self._since, 1)}
        if self._error is not None:
            out["error"] = self._error
        return out

    def _model(self) -> Embedder:
        inner = self._inner
        if inner is None:
            raise ModelBuilding(self.waiting_reason())
        return inner


class ModelBuilder:
    """Runs a :class:`BuildPlan` on a thread of its own and hands the embedder to a :class:`DeferredEmbedder`;
    ``on_done(error)`` is called on that thread when it ends (``error`` None: ready)."""

    def __init__(self, deferred: DeferredEmbedder, plan: BuildPlan, nice: int,
                 on_done: Callable[[str | None], object]) -> None:
        self._deferred, self._nice, self._on_done = deferred, nice, on_done
        self._plan: BuildPlan | None = plan  # taken by the thread: not held once the model is there (its tokenizer)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise DaemonError("the model build was started already")
        self._thread = threading.Thread(target=self._run, name="memoryd-model-build", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> bool:
        """Wait for the thread at most ``timeout`` seconds; whether it ended (tests, shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            self._deferred.provide(self._build_and_load())
        except MemorydError as exc:
            error = str(exc)
        except Exception as exc:  # the build must never take the daemon down: keywords still answer
            log.exception("model.build_crashed")
            error = f"{type(exc).__name__}: {exc}"
        else:
            log.info("model.ready", model=self._deferred.model_id, seconds=round(time.monotonic() - t0, 2))
            self._on_done(None)
            return
        self._deferred.fail(error)
        log.error("model.build_failed", error=error, seconds=round(time.monotonic() - t0, 2),
                  action="serving keyword search only; the next start builds again")
        self._on_done(error)

    def _build_and_load(self) -> Embedder:
        """Build (niced), then load (normal priority: the query session's threads are made here). The plan
        is dropped on return, before ``on_done`` hands memory back (``trim``): its tokenizer goes with it."""
        plan, self._plan = self._plan, None
        if plan is None:
            raise DaemonError("the model build has no plan")
        log.info("model.building_in_background", model=self._deferred.model_id, expected_s=plan.expected_s,
                 note="the socket answers meanwhile; search ranks from keywords only until the model is ready")
        self._build_niced(plan.build)
        return plan.load()

    def _build_niced(self, build_files: Callable[[], None]) -> None:
        """``build_files`` (:attr:`BuildPlan.build`) on a helper thread at lower priority (its build child inherits it);
        a niced thread can never be made normal again, hence a thread of its own."""
        failure: list[BaseException] = []

        def build() -> None:
            lower_priority(self._nice, "model-build")
            try:
                build_files()
            except BaseException as exc:  # re-raised on the builder's thread
                failure.append(exc)

        helper = threading.Thread(target=build, name="memoryd-model-build-niced", daemon=True)
        helper.start()
        helper.join()
        if failure:
            raise failure[0]


def first_build_of(cfg: Config) -> BuildPlan | None:
    """The configured model's first build, when it has one to make (:mod:`memoryd.indexer.embedding.build_plan`)."""
    from memoryd.indexer.embedding.build_plan import plan_first_build

    return plan_first_build(cfg.embedding, cfg.model_cache_dir, cfg.embedding_api_key)


def build_note(text: str, deferred: DeferredEmbedder | None) -> str:
    """The systemd status line ``text`` with the build's state after it, while there is one."""
    if deferred is None or deferred.ready:
        return text
    return f"{text}; {deferred.waiting_reason()}, keyword search answers meanwhile"
