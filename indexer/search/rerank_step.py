"""The optional remote reranker as a step of the query path (``[rerank]``, off by default).

Fusion ranks a query's candidates from two cheap legs; a cross-encoder reads the query and a
passage together and tells an answer from a passage that merely shares its words or topic. On the
same top-30 candidates, an oracle ordering lifts LoCoMo's multi-hop AllR@10 from 0.724 to 0.875, and
users who run llama.cpp's server, TEI, vLLM or Infinity have such a model at hand. So when
``rerank.url`` is set, the first ``rerank.top_n`` hits after fusion (and the optional reorderings)
are sent to it and put in the order of its scores; the hits below keep theirs.

It never makes a search fail or wait long: the call has ``rerank.timeout_ms`` in all, and any failure
(down, slow, HTTP error, an answer that is not one finite score per hit:
:mod:`memoryd.indexer.search.rerank_remote`) leaves the fused order as it was, is logged
(``rerank.fallback``) and counted (``status``'s ``rerank.fallbacks``). After a failure the server is
not asked again for a cool-down (:class:`memoryd.indexer.embedding.breaker.Breaker`), so a server that
is down costs the searches meanwhile nothing. Scores are cached in memory by
sha256(model + query + text): ``context`` and the MCP tools ask the same query again and again.

**Abstention on the reranker's scale.** A reranked hit's calibrated score is the reranker's own
judgement, mapped to [0, 1] by ``sigmoid(rerank.scale * logit + rerank.shift)``, where ``logit`` is
the server's score on a logit scale (``rerank.score_kind``: a probability in [0, 1] is turned into
its logit first; ``auto`` reads a call whose scores all lie in [0, 1] as probabilities). The defaults
(1, 0) take a probability-like score as it is; ``bench/rerank_eval.py URL`` fits the two on the dev
sets' answerable questions and their negatives for the user's model and prints them, so that
``search.min_score`` keeps its meaning. Hits below the reranked ones keep their own calibrated score,
capped at the lowest reranked one (they rank below it), and a hit with neither keyword evidence nor
vector agreement (:mod:`memoryd.indexer.search.pending`) is still never kept.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from memoryd.indexer.embedding.breaker import Breaker
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.rerank_remote import RerankFailed
from memoryd.indexer.settings.rerank import RerankConfig

log = structlog.get_logger(__name__)


class Scorer(Protocol):
    """What scores passages for a query: :class:`memoryd.indexer.search.rerank_remote.RemoteReranker`."""

    def scores(self, query: str, texts: Sequence[str], budget_s: float) -> list[float]: ...


@dataclass(frozen=True)
class Reranked:
    """What the step did to one search: ``hits`` in their new order, each reranked hit's server score
    (``scores``, by chunk id; empty when the fused order stands) and, when it stands, why (``reason``)."""

    hits: list[Hit]
    scores: dict[int, float] = field(default_factory=dict)
    reason: str | None = None
    cached: int = 0
    ms: float = 0.0

    def describe(self) -> dict[str, Any]:
        """``--explain``'s ``query_analysis.rerank``."""
        out: dict[str, Any] = {"applied": bool(self.scores), "ms": round(self.ms, 1)}
        if self.scores:
            out["hits"], out["cached"] = len(self.scores), self.cached
        if self.reason is not None:
            out["fallback"] = self.reason
        return out


def score_key(model: str, query: str, text: str) -> bytes:
    """The cache key of one score: binds it to the model, the query and the passage."""
    return hashlib.sha256(f"{model}\x00{query}\x00{text}".encode()).digest()


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


class RerankStep:
    """One ``[rerank]`` server's step; thread-safe (searches run on several threads)."""

    def __init__(self, cfg: RerankConfig, scorer: Scorer, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._scorer = scorer
        self._clock = clock
        self._breaker = Breaker(clock)
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, float] = OrderedDict()
        self.applied = 0
        self.fallbacks = 0
        self.last_error: str | None = None

    def rerank(self, query: str, hits: list[Hit]) -> Reranked:
        """``hits`` with the first ``top_n`` in the server's order (ties keep the fused order); unchanged
        (with the reason, logged and counted) when the server cannot say within the budget."""
        t0 = self._clock()
        head = hits[: self.cfg.top_n]
        if len(head) < 2:
            return Reranked(hits)
        texts = [h.text[: self.cfg.max_chars] for h in head]
        keys = [score_key(self.cfg.model, query, t) for t in texts]
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
            for k in known:
                self._cache.move_to_end(k)
        todo = list(dict.fromkeys(k for k in keys if k not in known))
        if todo:
            wait = self._breaker.admit(query=True)
            if wait is not None:
                return self._fallback(hits, t0, f"the reranker failed recently ({self.last_error}); asked again "
                                                f"in {wait:.0f} s")
            sent = {k: t for k, t in zip(keys, texts, strict=True) if k in todo}
            try:
                got = self._scorer.scores(query, [sent[k] for k in todo], self.cfg.timeout_ms / 1000)
            except RerankFailed as exc:
                self._breaker.failed()
                return self._fallback(hits, t0, str(exc))
            except Exception as exc:  # never a search's failure: a bug here leaves the fused order
                self._breaker.abandoned()
                return self._fallback(hits, t0, f"{type(exc).__name__}: {str(exc)[:200]}")
            self._breaker.succeeded()
            fresh = dict(zip(todo, got, strict=True))
            self._remember(fresh)
            known |= fresh
        raw = [known[k] for k in keys]
        order = sorted(range(len(head)), key=lambda i: -raw[i])  # stable: ties keep the fused order
        with self._lock:
            self.applied += 1
        return Reranked([head[i] for i in order] + hits[len(head):],
                        {head[i].chunk_id: raw[i] for i in range(len(head))},
                        cached=len(keys) - len(todo), ms=(self._clock() - t0) * 1000)

    def _remember(self, fresh: dict[bytes, float]) -> None:
        with self._lock:
            self._cache.update(fresh)
            while len(self._cache) > self.cfg.cache_entries:
                self._cache.popitem(last=False)

    def _fallback(self, hits: list[Hit], t0: float, reason: str) -> Reranked:
        with self._lock:
            self.fallbacks += 1
            self.last_error = reason
        log.warning("rerank.fallback", url=self.cfg.url, model=self.cfg.model, reason=reason,
                    action="the fused order stands")
        return Reranked(hits, reason=reason, ms=(self._clock() - t0) * 1000)

    def probabilities(self, scores: dict[int, float]) -> dict[int, float]:
        """Each reranked hit's calibrated score from its server score (see the module docstring)."""
        kind = self.cfg.score_kind
        if kind == "auto":
            kind = "probability" if all(0.0 <= s <= 1.0 for s in scores.values()) else "logit"
        return {i: _sigmoid(self.cfg.scale * (logit(s) if kind == "probability" else s) + self.cfg.shift)
                for i, s in scores.items()}

    def rescored(self, hits: list[Hit], scores: dict[int, float], alone: AbstractSet[int]) -> list[Hit]:
        """Calibrated ``hits`` (reranked first) with each reranked hit's score its reranker probability and
        the hits below capped at the lowest of those; a hit in ``alone`` keeps its own (keyword) score."""
        probs = self.probabilities(scores)
        floor = min(probs.values()) if probs else 1.0
        out = []
        for h in hits:
            if h.chunk_id in alone:
                out.append(h)
            elif h.chunk_id in probs:
                out.append(h.rescored(round(probs[h.chunk_id], 6)))
            else:
                out.append(h.rescored(round(min(h.score, floor), 6)))
        return out

    def close(self) -> None:
        close = getattr(self._scorer, "close", None)
        if close is not None:
            close()

    def stats(self) -> dict[str, Any]:
        """``status``'s ``rerank`` block: where, how often it reordered, how often the fused order stood."""
        with self._lock:
            return {"url": self.cfg.url, "model": self.cfg.model, "applied": self.applied,
                    "fallbacks": self.fallbacks, "last_error": self.last_error, "cached_scores": len(self._cache)}


def load_rerank(cfg: RerankConfig, api_key: str) -> RerankStep | None:
    """The step for ``[rerank]``; None when it is off (no ``url``)."""
    if not cfg.url:
        return None
    from memoryd.indexer.search.rerank_remote import RemoteReranker

    return RerankStep(cfg, RemoteReranker(cfg, api_key))
