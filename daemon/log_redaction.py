"""Secrets never reach a log line: every value of every event goes through the secret detector.

Request parameters end up in log events in many places — an error message that quotes
the namespace, the section title or the path a client sent (``request.failed``), the
path of a file the write path created, a library's warning that names a file. Redacting
at each call site would miss the next one, so :func:`redact_event` is a structlog
processor, installed by :mod:`memoryd.daemon.logs` for memoryd's own events and for the
stdlib records of libraries alike: each string value (in lists and dicts too) is
passed through :func:`memoryd.indexer.redaction.privacy.redact` at level ``all`` (the
level of ``redact_for_log``), so a secret becomes ``[REDACTED:rule]`` and the rest of
the value stays readable. Configured secrets (the embedding server's API key) are redacted by
value first (:func:`protect`): the detector knows secrets by their form, and a key need not
have one. The event's timestamp, level and logger name are left alone.

The detector is imported on the first event, not with this module: the CLI configures
logging on every command and most commands never log anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from typing import Any

_KEEP = frozenset({"timestamp", "level", "logger"})
_KNOWN: set[str] = set()  # configured secrets, by value (protect)
KNOWN_MARK = "[REDACTED:configured]"


def protect(secret: str) -> None:
    """Redact ``secret`` by its value from every log line from now on, whatever it looks like.

    Why: the detector knows secrets by their form, and a configured key need not have one (a
    self-hosted server's ``local-embed-key-…``): a 401 that repeated it reached four kinds of log
    line. The embedder scrubs it where the server's text comes in (indexer/embedding/server_text.py);
    this is the second line. Values under 8 characters are ignored (they would redact common words)."""
    if len(secret) >= 8:
        _KNOWN.add(secret)


def _known_out(text: str) -> str:
    for secret in _KNOWN:
        if secret in text:
            text = text.replace(secret, KNOWN_MARK)
    return text


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The structlog processor: every value but the timestamp, level and logger name, redacted."""
    from memoryd.indexer.redaction.privacy import redact

    def scrub(value: object) -> object:
        return _scrubbed(value, lambda text: redact(_known_out(text), "all"))

    for key in list(event_dict):
        if key not in _KEEP:
            event_dict[key] = scrub(event_dict[key])
    return event_dict


def _scrubbed(value: object, redact: Callable[[str], str], depth: int = 0) -> object:
    """``value`` with every string in it redacted (paths as their text; containers a few levels deep)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, os.PathLike):
        return redact(os.fspath(value)) if isinstance(os.fspath(value), str) else value
    if depth >= 4:
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrubbed(v, redact, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, redact, depth + 1) for k, v in value.items()}
    return value
