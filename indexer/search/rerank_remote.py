"""The remote reranker's wire: one POST per search, every answer treated as hostile.

Two answer shapes are in use and both are read, whichever API was asked:

* ``{"results": [{"index": i, "relevance_score": s}, ...]}`` — llama.cpp's ``/v1/rerank``, vLLM,
  Infinity, Jina and Cohere-style APIs (``score`` is read when ``relevance_score`` is absent);
* ``[{"index": i, "score": s}, ...]`` — Hugging Face TEI's ``/rerank``.

An answer is used only if it gives exactly one finite score to each document sent: a wrong count,
a duplicate or out-of-range index, a non-number, NaN or infinity, or a body over the cap
(:func:`answer_cap`) fails the call (:class:`RerankFailed`) and the fused order stands. The order the
server lists them in is ignored (the scores are sorted here), and so is a ``top_n`` it may not have
honoured (all of the documents are asked for). The whole call — connect, send, every read — ends by
the time budget (:mod:`memoryd.indexer.embedding.http_deadline`), so a slow trickle is cut like a
silent server. The key goes in the ``Authorization`` header only, and what the server says back is
scrubbed of it (:mod:`memoryd.indexer.embedding.server_text`) before any message is built from it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from memoryd.indexer.errors import MemorydError
from memoryd.indexer.settings.rerank import RerankConfig

ANSWER_SLACK = 64 * 1024  # bytes an answer may take beyond its per-document share (the envelope, usage...)
PER_DOCUMENT = 512  # bytes per document: an index and a score, with room for a returned text's echo cut off


class RerankFailed(MemorydError):
    """A rerank call gave no usable answer (down, slow, refused, or an answer that is not one score per
    document); the message says what, never the query or the texts."""


def answer_cap(n: int, max_chars: int) -> int:
    """The most bytes an answer for ``n`` documents may take (a server may echo the documents back)."""
    return ANSWER_SLACK + n * (PER_DOCUMENT + 4 * max_chars)


def api_of(cfg: RerankConfig) -> str:
    """The request shape to send: ``cfg.api``, or for ``auto`` TEI's when the URL's path is ``/rerank``."""
    if cfg.api != "auto":
        return cfg.api
    return "tei" if urlsplit(cfg.url).path.rstrip("/") == "/rerank" else "documents"


def request_body(cfg: RerankConfig, query: str, texts: Sequence[str]) -> dict[str, Any]:
    """The JSON body for ``texts`` (each already cut to ``max_chars``)."""
    if api_of(cfg) == "tei":
        return {"query": query, "texts": list(texts), "raw_scores": False, "truncate": True}
    body: dict[str, Any] = {"query": query, "documents": list(texts), "top_n": len(texts), "return_documents": False}
    if cfg.model:
        body["model"] = cfg.model
    return body


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def parse_scores(data: bytes, n: int) -> list[float]:
    """One finite score per document ``0..n-1`` from an answer of either shape; :class:`RerankFailed` with
    what was wrong otherwise."""
    try:
        doc = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RerankFailed(f"the answer is not JSON ({str(exc)[:80]})") from None
    rows = doc.get("results") if isinstance(doc, dict) else doc
    if isinstance(doc, dict) and rows is None:
        rows = doc.get("data")  # some OpenAI-flavoured servers
    if not isinstance(rows, list):
        raise RerankFailed("the answer has neither a 'results' list nor is it a list of {index, score}")
    if len(rows) != n:
        raise RerankFailed(f"the answer scores {len(rows)} documents, {n} were sent")
    scores: list[float | None] = [None] * n
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise RerankFailed(f"result {k} is not an object")
        index, score = row.get("index"), row.get("relevance_score", row.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise RerankFailed(f"result {k} has index {str(index)[:20]!r}, not one of 0..{n - 1}")
        if scores[index] is not None:
            raise RerankFailed(f"index {index} is scored twice")
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise RerankFailed(f"result {k} (index {index}) has score {str(score)[:20]!r}, not a finite number")
        scores[index] = float(score)
    return [s for s in scores if s is not None]


class RemoteReranker:
    """The HTTP client of one ``[rerank]`` server (thread-safe: httpx's client is)."""

    def __init__(self, cfg: RerankConfig, api_key: str) -> None:
        import httpx

        from memoryd.indexer.embedding.http_deadline import DeadlineTransport

        self.cfg = cfg
        self._key = api_key
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, transport=DeadlineTransport(), timeout=cfg.timeout_ms / 1000)

    def __repr__(self) -> str:  # never the key
        return f"RemoteReranker({self.cfg.url!r}, model={self.cfg.model!r})"

    def scores(self, query: str, texts: Sequence[str], budget_s: float) -> list[float]:
        """The server's score of each of ``texts`` for ``query``, within ``budget_s``; :class:`RerankFailed`."""
        import httpx

        from memoryd.indexer.embedding.http_deadline import CallFailed, deadline, read_capped

        body = request_body(self.cfg, query, texts)
        if budget_s <= 0:
            raise RerankFailed("no time left in the search's budget")
        try:
            with deadline(budget_s), self._client.stream("POST", self.cfg.url, json=body,
                                                         timeout=budget_s) as resp:
                data = read_capped(resp, answer_cap(len(texts), self.cfg.max_chars) if resp.status_code == 200
                                   else ANSWER_SLACK)
        except httpx.TimeoutException:
            raise RerankFailed(f"no complete answer within {budget_s * 1000:.0f} ms") from None
        except CallFailed as exc:
            raise RerankFailed(str(exc)) from None
        except httpx.HTTPError as exc:  # refused, reset, DNS...
            raise RerankFailed(f"{type(exc).__name__}: {self._scrub(str(exc))}") from None
        if resp.status_code != 200:
            raise RerankFailed(f"HTTP {resp.status_code}: {self._scrub(data[:300].decode('utf-8', 'replace'))}")
        return parse_scores(data, len(texts))

    def _scrub(self, text: str) -> str:
        from memoryd.indexer.embedding.server_text import scrub

        return scrub(text, self._key)

    def close(self) -> None:
        self._client.close()
