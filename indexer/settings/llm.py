"""``[llm]``: an OpenAI-compatible ``/v1/chat/completions`` server, off by default.

Nothing in memoryd needs a model: every feature that can use one (``observe`` extraction, and
whatever else imports :mod:`memoryd.indexer.llm`) has a default that works without it. When
``provider = "openai"``, the URL and model are required and checked at start like the embedding
provider's, so a typo fails ``memoryd run`` with the key's name, not the first conversation.

The API key is read at start from the environment variable ``api_key_env`` names, or from the
file ``api_key_file`` — which must be ours and mode 0600 (group or others able to read it means
the key is already not a secret; able to write it, someone else chooses which server gets our
conversations). Never from the config file itself, never logged, never in ``status`` or errors.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from memoryd.indexer.errors import ConfigError

LLMProvider = Literal["off", "openai"]
ResponseFormat = Literal["json_object", "json_schema", "none"]
LLM_PROVIDERS: tuple[LLMProvider, ...] = get_args(LLMProvider)
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = get_args(ResponseFormat)
MAX_KEY_BYTES = 4096


@dataclass(frozen=True)
class LLMConfig:
    """What ``[llm]`` in memoryd.toml holds (config/memoryd.toml documents every key)."""

    provider: LLMProvider = "off"
    url: str = ""  # base URL, e.g. "http://localhost:8080/v1" (llama.cpp), "http://localhost:11434/v1" (Ollama)
    model: str = ""  # the server's model name
    api_key_env: str = ""  # the NAME of the environment variable holding the key ("": none)
    api_key_file: Path | None = None  # or a file holding it (ours, mode 0600)
    timeout_s: float = 60.0  # per call, in all: connect, send, the whole answer however it trickles
    retries: int = 2  # on connection errors, 429 and 5xx, exponential backoff from 1 s
    daily_tokens: int = 200_000  # prompt + answer tokens a UTC day may spend; 0 = no cap
    max_answer_tokens: int = 1024  # "max_tokens" sent with each call
    max_answer_bytes: int = 262_144  # an answer longer than this is cut off and refused
    temperature: float = 0.0
    # "json_object": response_format {"type": "json_object"} (Ollama, llama.cpp, vLLM, OpenAI);
    # "json_schema": the schema itself as response_format (OpenAI, llama.cpp, vLLM: constrained decoding);
    # "none": nothing sent (servers that refuse the field); the answer is checked against the schema either way.
    response_format: ResponseFormat = "json_object"


def _check(ok: bool, key: str, value: object, why: str) -> None:
    if not ok:
        raise ConfigError(f"config 'llm.{key}' = {value!r}: {why}")


def validate_llm(c: LLMConfig) -> None:
    """Raise :class:`ConfigError` naming the ``llm.*`` key at fault."""
    _check(c.provider in LLM_PROVIDERS, "provider", c.provider, f"must be one of {LLM_PROVIDERS}")
    _check(c.response_format in RESPONSE_FORMATS, "response_format", c.response_format,
           f"must be one of {RESPONSE_FORMATS}")
    _check(0 < c.timeout_s <= 600, "timeout_s", c.timeout_s, "must be in (0, 600]")
    _check(0 <= c.retries <= 10, "retries", c.retries, "must be in 0..10")
    _check(c.daily_tokens >= 0, "daily_tokens", c.daily_tokens, "must be >= 0 (0 = no cap)")
    _check(16 <= c.max_answer_tokens <= 32_768, "max_answer_tokens", c.max_answer_tokens, "must be in 16..32768")
    _check(1024 <= c.max_answer_bytes <= 16 * 2**20, "max_answer_bytes", c.max_answer_bytes,
           "must be in 1024..16777216")
    _check(0.0 <= c.temperature <= 2.0, "temperature", c.temperature, "must be in 0..2")
    _check(not (c.api_key_env and c.api_key_file), "api_key_file", str(c.api_key_file),
           "set api_key_env or api_key_file, not both")
    if c.provider == "openai":
        _check(c.url.startswith(("http://", "https://")), "url", c.url,
               "required for provider 'openai': the server's base URL, e.g. http://localhost:8080/v1")
        _check(bool(c.model), "model", c.model, "required for provider 'openai': the server's model name")


def read_key(c: LLMConfig, env: Mapping[str, str]) -> str:
    """The API key, from the environment or the 0600 file; "" when neither is configured.

    Errors name the variable or the file, never the key."""
    if c.api_key_env:
        key = env.get(c.api_key_env, "")
        if not key:
            raise ConfigError(f"config 'llm.api_key_env' = {c.api_key_env!r}: that environment variable is not set")
        return key
    if c.api_key_file is None:
        return ""
    path = c.api_key_file
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r}: cannot be read "
                          f"({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != os.geteuid():
            raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r}: belongs to uid {st.st_uid}, not to you")
        if mode & 0o077:
            raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r} (mode {mode:04o}): other users can "
                              f"reach it; fix it with: chmod 600 {path}")
        data = os.read(fd, MAX_KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:
        raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r}: longer than {MAX_KEY_BYTES} bytes")
    try:
        key = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r}: not UTF-8 text") from None
    if not key or any(ch.isspace() or not ch.isprintable() for ch in key):
        raise ConfigError(f"config 'llm.api_key_file' = {str(path)!r}: must hold the key alone on one line")
    return key
