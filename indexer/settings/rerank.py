"""``[rerank]``: an optional remote cross-encoder that reorders the first hits (off by default).

Its own module so that :mod:`memoryd.indexer.config` only names the table; what a reranker does
with it is :mod:`memoryd.indexer.search.rerank_step` (docs/quality.md, "Remote reranker").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memoryd.indexer.errors import ConfigError

RerankApi = Literal["auto", "documents", "tei"]
RERANK_APIS: tuple[RerankApi, ...] = ("auto", "documents", "tei")
ScoreKind = Literal["auto", "probability", "logit"]
SCORE_KINDS: tuple[ScoreKind, ...] = ("auto", "probability", "logit")


@dataclass(frozen=True)
class RerankConfig:
    """A ``/rerank`` server: llama.cpp's ``llama-server --reranking``, vLLM, Infinity, a Jina/Cohere-style API
    (``results[].relevance_score``) or Hugging Face TEI (a bare ``[{index, score}]``)."""

    url: str = ""  # the endpoint, e.g. "http://127.0.0.1:8012/v1/rerank"; "" = off
    model: str = ""  # sent as "model" (llama.cpp and TEI ignore it); part of the score cache key
    # "documents": {"query", "documents", "top_n"} (llama.cpp, vLLM, Infinity, Jina, Cohere); "tei":
    # {"query", "texts"}; "auto": "tei" when the URL's path is exactly /rerank, else "documents".
    api: RerankApi = "auto"
    api_key_env: str = ""  # the environment variable holding the key ("": none); never the key itself
    api_key_file: Path | None = None  # or a file holding it, mode 0600 (checked when the config is loaded)
    timeout_ms: int = 1500  # the whole call, connect to last byte: past it the fused order stands
    top_n: int = 30  # the first hits after fusion that are reordered
    max_chars: int = 2000  # each hit's text is cut to this many characters before it is sent
    cache_entries: int = 20_000  # scores kept in memory, by sha256(model + query + text)
    # The calibrated score of a reranked hit: sigmoid(scale * logit + shift), logit the server's score on a
    # logit scale (a score in [0, 1] is read as a probability first). bench/rerank_eval.py fits both for a
    # model; the defaults take a probability-like score as it is.
    scale: float = 1.0
    shift: float = 0.0
    # How to read the server's scores: "probability" (in [0, 1]: TEI, Cohere, Jina), "logit" (raw: llama.cpp,
    # vLLM for most cross-encoders), or "auto" (a call whose scores all lie in [0, 1] is read as probabilities).
    score_kind: ScoreKind = "auto"


def validate_rerank(r: RerankConfig) -> None:
    """Raise :class:`ConfigError` naming the ``rerank.*`` key at fault."""

    def check(ok: bool, key: str, value: object, why: str) -> None:
        if not ok:
            raise ConfigError(f"config 'rerank.{key}' = {value!r}: {why}")

    check(r.url == "" or r.url.startswith(("http://", "https://")), "url", r.url,
          "must be an http(s) URL or empty (off)")
    check(r.api in RERANK_APIS, "api", r.api, f"must be one of {RERANK_APIS}")
    check(100 <= r.timeout_ms <= 60_000, "timeout_ms", r.timeout_ms, "must be in 100..60000")
    check(2 <= r.top_n <= 200, "top_n", r.top_n, "must be in 2..200")
    check(100 <= r.max_chars <= 100_000, "max_chars", r.max_chars, "must be in 100..100000")
    check(0 <= r.cache_entries <= 1_000_000, "cache_entries", r.cache_entries, "must be in 0..1000000")
    check(r.score_kind in SCORE_KINDS, "score_kind", r.score_kind, f"must be one of {SCORE_KINDS}")
    check(r.scale > 0, "scale", r.scale, "must be > 0 (a higher server score must mean more relevant)")
    check(not (r.api_key_env and r.api_key_file), "api_key_file", str(r.api_key_file),
          "set rerank.api_key_env or rerank.api_key_file, not both")


def rerank_key(r: RerankConfig, env: Mapping[str, str]) -> str:
    """The reranker's API key: ``$<rerank.api_key_env>`` or the content of ``rerank.api_key_file`` (which
    must be a regular file of this user's, readable by nobody else: a key in a world-readable file is
    a leaked key). Never logged; "" without either."""
    if r.api_key_env:
        key = env.get(r.api_key_env, "")
        if not key:
            raise ConfigError(f"config 'rerank.api_key_env' = {r.api_key_env!r}: that environment variable is not set")
        return key
    if r.api_key_file is None:
        return ""
    path = Path(os.path.expanduser(r.api_key_file))
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(f"config 'rerank.api_key_file' = {str(path)!r}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.getuid():
        raise ConfigError(f"config 'rerank.api_key_file' = {str(path)!r}: must be a file of this user's with mode "
                          f"0600 (it is {stat.filemode(st.st_mode)}); run: chmod 600 {path}")
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ConfigError(f"config 'rerank.api_key_file' = {str(path)!r}: the file is empty")
    return key
