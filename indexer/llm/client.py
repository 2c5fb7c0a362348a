"""The ``[llm]`` client: one JSON object from an OpenAI-compatible ``/v1/chat/completions`` server.

:meth:`LLMClient.complete_json` is the whole interface: messages in, a dict that fits the
caller's schema out, or a typed :mod:`~memoryd.indexer.llm.errors` error. Every answer is hostile:

* **one deadline per call** and **a size cap** (``timeout_s``, ``max_answer_bytes``) through
  :mod:`memoryd.indexer.embedding.http_deadline`: a server that trickles a byte every few seconds,
  or sends 100 MB, is cut off, not waited for;
* **retries** with exponential backoff (``retries``) on connection errors, 429 and 5xx only (a
  ``Retry-After`` up to :data:`BACKOFF_MAX_S` is honoured); a passed deadline is not retried (the
  caller tries again later), and neither is a 4xx (a configuration error) or a bad answer;
* **a circuit breaker** (the embedder's): after a failure, calls fail at once for a cool-down
  that doubles while the server keeps failing, so a dead server costs a turn nothing;
* **a per-day token budget** (:mod:`~memoryd.indexer.llm.budget`);
* **checked output**: the message content must be one JSON object (a Markdown code fence around
  it is taken off: small models add one whatever they are told) that fits ``schema``
  (:mod:`~memoryd.indexer.llm.schema`).

The key is sent only in the ``Authorization`` header; whatever the server says is scrubbed of it
(and of what the secret detector flags) before it enters a message, ``health`` or a log line.
Messages never hold the request: it is the user's conversation.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memoryd.indexer.embedding.breaker import Breaker
from memoryd.indexer.embedding.server_text import scrub
from memoryd.indexer.llm.budget import TokenBudget, estimate_tokens
from memoryd.indexer.llm.errors import LLMBadAnswer, LLMOff, LLMUnavailable
from memoryd.indexer.llm.schema import SchemaViolation, check

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from memoryd.indexer.llm.config import LLMConfig

BACKOFF_S = 1.0
BACKOFF_MAX_S = 8.0
ERROR_SLACK = 64 * 1024  # what a non-200 answer may take (its message is all we read of it)
KEY_MARK = "[REDACTED:llm.api_key]"
BUDGET_FILE = "llm-budget.json"
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.S)

Message = Mapping[str, str]


def endpoint(url: str) -> str:
    """``http://host:port/v1`` -> ``.../v1/chat/completions`` (a full endpoint is kept)."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


@dataclass(frozen=True)
class Settings:
    url: str
    model: str
    timeout_s: float
    retries: int
    max_answer_tokens: int
    max_answer_bytes: int
    temperature: float
    response_format: str

    @classmethod
    def from_config(cls, c: LLMConfig) -> Settings:
        if c.provider == "off":
            raise LLMOff("llm.provider is 'off': no model is configured")
        return cls(url=endpoint(c.url), model=c.model, timeout_s=c.timeout_s, retries=c.retries,
                   max_answer_tokens=c.max_answer_tokens, max_answer_bytes=c.max_answer_bytes,
                   temperature=c.temperature, response_format=c.response_format)


class LLMClient:
    """Thread-safe; ``client``, ``breaker`` and ``sleep`` are injectable for tests."""

    def __init__(self, settings: Settings, api_key: str, budget: TokenBudget,
                 client: httpx.Client | None = None, breaker: Breaker | None = None,
                 sleep: Any = time.sleep) -> None:
        import httpx

        from memoryd.indexer.embedding.http_deadline import DeadlineTransport

        self._s = settings
        self._key = api_key
        self.budget = budget
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=settings.timeout_s, headers=headers,
                                              transport=DeadlineTransport())
        self._breaker = breaker or Breaker()
        self._sleep = sleep
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.last_ok: float | None = None
        self.calls = 0  # answers received (any status)

    def __repr__(self) -> str:
        return f"LLMClient(url={self._s.url!r}, model={self._s.model!r})"

    @property
    def url(self) -> str:
        return self._s.url

    def health(self) -> dict[str, Any]:
        """What ``status`` shows (never the key)."""
        with self._lock:
            return {"provider": "openai", "url": self._s.url, "model": self._s.model,
                    "reachable": self.last_error is None, "last_error": self.last_error, "last_ok": self.last_ok,
                    "calls": self.calls, "tokens": self.budget.snapshot()}

    def retry_now(self) -> None:
        """Close the circuit breaker: the next call tries the server at once."""
        self._breaker.reset()

    def close(self) -> None:
        self._client.close()

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        """The model's answer to ``messages`` as a dict fitting ``schema``.

        Raises LLMUnavailable (retry later), LLMBadAnswer (the answer did not fit), LLMBudgetExhausted."""
        if (wait := self._breaker.admit(query=False)) is not None:
            when = f"tried again in {wait:.0f} s" if wait > 0 else "being tried again"
            raise LLMUnavailable(f"llm server {self._s.url} is down ({when}): {self.last_error}", retry_after=wait)
        body: dict[str, Any] = {"model": self._s.model, "messages": [dict(m) for m in messages],
                                "temperature": self._s.temperature, "max_tokens": self._s.max_answer_tokens,
                                "stream": False}
        if self._s.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif self._s.response_format == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": dict(schema), "strict": True}}
        reserve = sum(estimate_tokens(m.get("content", "")) + 4 for m in messages) + self._s.max_answer_tokens
        self.budget.reserve(reserve)
        used = 0
        try:
            data, used = self._call(body, reserve)
            out = parse_answer(data, schema, self._s.url)
        except LLMBadAnswer as exc:
            self._failed(str(exc))
            raise
        except LLMUnavailable as exc:
            self._failed(str(exc))
            raise
        except BaseException:
            self._breaker.abandoned()
            raise
        finally:
            self.budget.settle(reserve, used)
        with self._lock:
            self.last_ok, self.last_error = time.time(), None
        self._breaker.succeeded()
        return out

    def check(self) -> str:
        """For ``memoryd doctor``: GET ``{base}/models`` (spends no tokens); what the server serves.

        Raises LLMUnavailable when it does not answer or does not serve the configured model."""
        base = self._s.url.rsplit("/chat/completions", 1)[0]
        data, status = self._get(f"{base}/models")
        if status != 200:
            raise LLMUnavailable(f"llm server {base}: GET /models answered HTTP {status}")
        try:
            ids = [str(m.get("id")) for m in json.loads(data).get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError):
            raise LLMUnavailable(f"llm server {base}: GET /models did not answer a model list") from None
        if ids and self._s.model not in ids:
            raise LLMUnavailable(f"llm server {base} does not serve llm.model {self._s.model!r} "
                                 f"(it serves {', '.join(self._scrub(i) for i in ids[:5])})")
        return f"{base} serves {self._s.model!r}"

    # -- the wire -------------------------------------------------------------------

    def _failed(self, error: str) -> None:
        with self._lock:
            self.last_error = error
        self._breaker.failed()

    def _call(self, body: dict[str, Any], reserve: int) -> tuple[bytes, int]:
        attempt = 0
        while True:
            try:
                return self._post(body, reserve)
            except _Retryable as exc:
                if attempt < self._s.retries and exc.again:
                    self._sleep(min(BACKOFF_MAX_S, max(exc.retry_after, BACKOFF_S * 2 ** attempt)))
                    attempt += 1
                    continue
                raise LLMUnavailable(f"llm server {self._s.url}: {exc}", retry_after=exc.retry_after) from None

    def _post(self, body: dict[str, Any], reserve: int) -> tuple[bytes, int]:
        import httpx

        from memoryd.indexer.embedding.http_deadline import CallFailed, deadline, read_capped

        limit = self._s.timeout_s
        try:
            with deadline(limit), self._client.stream("POST", self._s.url, json=body) as resp:
                cap = self._s.max_answer_bytes if resp.status_code == 200 else ERROR_SLACK
                data = read_capped(resp, cap)
        except httpx.TimeoutException:
            raise _Retryable(f"no complete answer within {limit:g} s", again=False) from None
        except CallFailed as exc:
            raise _Retryable(str(exc), again=False) from None
        except httpx.HTTPError as exc:
            raise _Retryable(f"{type(exc).__name__}: {self._scrub(str(exc))}") from None
        with self._lock:
            self.calls += 1
        if resp.status_code in _RETRY_STATUS:
            raise _Retryable(f"HTTP {resp.status_code}: {self._message(resp, data)}",
                             retry_after=_retry_after(resp.headers.get("retry-after", "")))
        if resp.status_code != 200:
            raise LLMUnavailable(f"llm server {self._s.url} refused the request (HTTP {resp.status_code}: "
                                 f"{self._message(resp, data)}); check llm.model and the API key")
        return data, _usage(data, reserve)

    def _get(self, url: str) -> tuple[bytes, int]:
        import httpx

        from memoryd.indexer.embedding.http_deadline import CallFailed, deadline, read_capped

        try:
            with deadline(min(self._s.timeout_s, 10.0)), self._client.stream("GET", url) as resp:
                return read_capped(resp, self._s.max_answer_bytes), resp.status_code
        except (httpx.HTTPError, CallFailed) as exc:
            raise LLMUnavailable(f"llm server {url}: {type(exc).__name__}: {self._scrub(str(exc))}") from None

    def _scrub(self, text: str) -> str:
        out = text.replace(self._key, KEY_MARK) if self._key else text
        return scrub(out, "")

    def _message(self, resp: httpx.Response, data: bytes) -> str:
        """The server's error message, short and scrubbed."""
        try:
            err = json.loads(data).get("error")
            msg = err.get("message") if isinstance(err, dict) else err
        except (ValueError, AttributeError, RecursionError):
            msg = None
        return self._scrub(str(msg or resp.reason_phrase))


class _Retryable(Exception):
    def __init__(self, message: str, again: bool = True, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.again = again
        self.retry_after = retry_after


def _retry_after(value: str) -> float:
    try:
        return max(0.0, min(float(value), BACKOFF_MAX_S))
    except ValueError:
        return 0.0


def _usage(data: bytes, fallback: int) -> int:
    """Tokens the server says the call took; ``fallback`` (the reservation) when it does not say."""
    try:
        total = json.loads(data).get("usage", {}).get("total_tokens")
    except (ValueError, AttributeError, RecursionError):
        return fallback
    return total if isinstance(total, int) and not isinstance(total, bool) and 0 <= total <= 10 * fallback \
        else fallback


def parse_answer(data: bytes, schema: Mapping[str, Any], url: str = "llm server") -> dict[str, Any]:
    """The JSON object in a chat-completions answer, checked against ``schema``; LLMBadAnswer otherwise."""
    try:
        choice = json.loads(data)["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise LLMBadAnswer(f"llm server {url}: not a chat-completions answer") from None
    if not isinstance(content, str):
        raise LLMBadAnswer(f"llm server {url}: the answer has no text content")
    if choice.get("finish_reason") == "length":
        raise LLMBadAnswer(f"llm server {url}: the answer was cut at max_tokens (raise llm.max_answer_tokens)")
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    try:
        value = json.loads(text)
    except RecursionError:
        raise LLMBadAnswer(f"llm server {url}: the answer is nested too deep") from None
    except json.JSONDecodeError as exc:
        raise LLMBadAnswer(f"llm server {url}: the answer is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise LLMBadAnswer(f"llm server {url}: the answer is JSON but not an object")
    try:
        check(value, schema)
    except SchemaViolation as exc:
        raise LLMBadAnswer(f"llm server {url}: the answer does not fit the schema: {exc}") from None
    return value


def client_for(c: LLMConfig, api_key: str, data_dir: Path) -> LLMClient | None:
    """The daemon's one client (None when ``provider = "off"``), its budget kept in ``data_dir``
    (:data:`BUDGET_FILE`) so a restart does not reset the day. No call is made."""
    if c.provider == "off":
        return None
    return load_client(c, api_key, TokenBudget(c.daily_tokens, data_dir / BUDGET_FILE))


def load_client(c: LLMConfig, api_key: str, budget: TokenBudget) -> LLMClient:
    """The configured client (no call made: a model that is down must not stop the daemon from starting)."""
    return LLMClient(Settings.from_config(c), api_key, budget)
