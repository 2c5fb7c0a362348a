"""The one place that configures logging, for the daemon and the CLI.

Everything ends in a single stdlib handler on the root logger, whose
``structlog.stdlib.ProcessorFormatter`` renders both kinds of records the same
way:

* memoryd's own events (``structlog.get_logger(__name__)`` anywhere) at the
  configured level;
* records of libraries that use stdlib ``logging`` (watchdog, apscheduler, ...)
  at WARNING and above (or the configured level if that is higher), so their
  chatter stays out while their problems show, in the same format.

Formats: ``json`` (one JSON object per line: ``timestamp`` ISO-8601 UTC,
``level``, ``event``, ``logger``, the event's keys, and ``exception`` as a
string), ``console`` (aligned ``key=value`` text, coloured on a TTY), or
``auto``: JSON when the stream is not a TTY (under systemd stderr is a journald
stream, and ``journalctl -o cat`` then yields JSON lines), console otherwise.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from memoryd.daemon.log_redaction import redact_event
from memoryd.indexer.config import LOG_FORMATS, LOG_LEVELS
from memoryd.indexer.errors import ConfigError

__all__ = ["configure_logging", "reset_logging"]

# Third-party stdlib loggers pass below this level only if memoryd's level is higher.
_FOREIGN_FLOOR = logging.WARNING


class _Handler(logging.StreamHandler[TextIO]):
    """memoryd's root handler; the class marks it so reconfiguring replaces it."""

    def __init__(self, stream: TextIO, level: int, previous_root_level: int) -> None:
        super().__init__(stream)
        self.setLevel(level)
        self.foreign_level = max(level, _FOREIGN_FLOOR)
        self.previous_root_level = previous_root_level
        self.addFilter(self._filter)

    def _filter(self, record: logging.LogRecord) -> bool:
        # wrap_for_formatter attaches ``_logger`` to structlog's own records.
        return hasattr(record, "_logger") or record.levelno >= self.foreign_level


def configure_logging(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Route structlog and stdlib logging into one formatted stream.

    ``level`` is one of :data:`memoryd.indexer.config.LOG_LEVELS`, ``fmt`` one of
    :data:`memoryd.indexer.config.LOG_FORMATS` (else :class:`ConfigError` naming
    ``log.level`` / ``log.format``). ``stream`` defaults to the *current*
    ``sys.stderr``. Idempotent: a second call replaces the first one's handler
    and settings instead of adding to them.
    """
    if level not in LOG_LEVELS:
        raise ConfigError(f"config 'log.level' = {level!r}: must be one of {LOG_LEVELS}")
    if fmt not in LOG_FORMATS:
        raise ConfigError(f"config 'log.format' = {fmt!r}: must be one of {LOG_FORMATS}")
    out: TextIO = sys.stderr if stream is None else stream
    json_lines = fmt == "json" or (fmt == "auto" and not _isatty(out))
    numeric = logging.getLevelName(level.upper())

    root = logging.getLogger()
    previous = _remove_handlers(root)
    handler = _Handler(out, numeric, root.level if previous is None else previous)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(),
            processors=_render_processors(json_lines, colors=_isatty(out)),
        )
    )
    root.addHandler(handler)
    root.setLevel(numeric)
    structlog.configure(
        # filter_by_level first: a call below the level (search.done at debug, per query) stops there instead of
        # paying the time stamp and the secret scan of every value for a line the handler then drops.
        processors=[structlog.stdlib.filter_by_level, *_shared_processors(),
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: module-level loggers must follow a later reconfiguration
        # (tests, ``memoryd run`` after a CLI default) instead of keeping the first.
        cache_logger_on_first_use=False,
    )


def reset_logging() -> None:
    """Undo :func:`configure_logging`: remove its handler, restore the root level and structlog defaults."""
    root = logging.getLogger()
    previous = _remove_handlers(root)
    if previous is not None:
        root.setLevel(previous)
    structlog.reset_defaults()


def _remove_handlers(root: logging.Logger) -> int | None:
    """Remove our handlers; return the root level from before the first configure, if any."""
    previous: int | None = None
    for handler in list(root.handlers):
        if isinstance(handler, _Handler):
            previous = handler.previous_root_level
            root.removeHandler(handler)
            handler.close()
    return previous


def _shared_processors() -> list[Any]:
    """Steps both record kinds go through before rendering: the fields every line has."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        redact_event,  # no secret in any value (memoryd.daemon.log_redaction)
    ]


def _render_processors(json_lines: bool, colors: bool) -> list[Any]:
    meta = structlog.stdlib.ProcessorFormatter.remove_processors_meta
    if json_lines:
        return [
            meta,
            structlog.processors.format_exc_info,  # exc_info -> "exception": traceback string
            redact_event,  # the traceback's messages too
            _fixed_keys_first,
            structlog.processors.JSONRenderer(ensure_ascii=False, default=str),
        ]
    # ConsoleRenderer formats exc_info itself (format_exc_info first would warn).
    return [
        meta,
        structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=structlog.dev.plain_traceback),
    ]


_FIRST_KEYS = ("timestamp", "level", "logger", "event")


def _fixed_keys_first(_logger: Any, _method: str, event_dict: Any) -> Any:
    """Put the fields every line has first, so raw JSON lines read left to right."""
    ordered = {k: event_dict.pop(k) for k in _FIRST_KEYS if k in event_dict}
    ordered.update(event_dict)
    return ordered


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or a bare write()-only object
        return False
