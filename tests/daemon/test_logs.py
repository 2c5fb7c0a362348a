"""memoryd.daemon.logs: one format for structlog and stdlib records, idempotent configuration."""

from __future__ import annotations

import io
import json
import logging
import re
from datetime import UTC, datetime

import pytest
import structlog

from memoryd.daemon.logs import configure_logging, reset_logging
from memoryd.indexer.errors import ConfigError


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_logging():
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    reset_logging()
    assert root.level == level
    assert root.handlers == handlers


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_on_a_non_tty_stream():
    out = io.StringIO()
    configure_logging("info", "auto", stream=out)
    structlog.get_logger("daemon.test").info("model.built", dim=384, note="中文")
    (line,) = _lines(out)
    assert line["event"] == "model.built"
    assert line["level"] == "info"
    assert line["logger"] == "daemon.test"
    assert line["dim"] == 384
    assert line["note"] == "中文"
    stamp = datetime.fromisoformat(line["timestamp"])
    assert stamp.utcoffset() == UTC.utcoffset(None)
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert list(line)[:4] == ["timestamp", "level", "logger", "event"]


def test_auto_is_console_on_a_tty():
    out = TtyStream()
    configure_logging("info", "auto", stream=out)
    structlog.get_logger("daemon.test").info("server.listening", path="/run/x.sock")
    text = out.getvalue()
    assert "\x1b[" in text  # coloured for a person
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "server.listening" in plain
    assert "path=/run/x.sock" in plain
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_console_on_a_pipe_has_no_colour_codes():
    out = io.StringIO()
    configure_logging("info", "console", stream=out)
    structlog.get_logger("daemon.test").warning("queue.full", pending=7)
    text = out.getvalue()
    assert "\x1b[" not in text
    assert "[warning" in text and "queue.full" in text and "pending=7" in text


def test_json_forced_even_on_a_tty():
    out = TtyStream()
    configure_logging("info", "json", stream=out)
    structlog.get_logger("daemon.test").info("x.y")
    assert _lines(out)[0]["event"] == "x.y"


def test_levels_filter_our_events():
    out = io.StringIO()
    configure_logging("warning", "json", stream=out)
    log = structlog.get_logger("daemon.test")
    log.info("hidden.info")
    log.warning("shown.warning")
    assert [line["event"] for line in _lines(out)] == ["shown.warning"]


def test_debug_level_shows_debug_events():
    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    structlog.get_logger("indexer.test").debug("chunk.split", n=3)
    assert _lines(out)[0]["level"] == "debug"


def test_stdlib_records_are_routed_in_the_same_format_from_warning_up():
    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    logging.getLogger("apscheduler.scheduler").info("Running job %s", "x")  # below the floor
    logging.getLogger("watchdog.observers").warning("inotify limit reached: %d", 8192)
    (line,) = _lines(out)
    assert line["event"] == "inotify limit reached: 8192"
    assert line["level"] == "warning"
    assert line["logger"] == "watchdog.observers"
    assert "timestamp" in line


def test_stdlib_records_follow_a_stricter_level():
    out = io.StringIO()
    configure_logging("error", "json", stream=out)
    logging.getLogger("watchdog").warning("dropped")
    logging.getLogger("watchdog").error("kept")
    assert [line["event"] for line in _lines(out)] == ["kept"]


def test_exceptions_are_a_string_field_in_json():
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        structlog.get_logger("daemon.test").exception("job.failed")
        logging.getLogger("apscheduler").exception("Job raised")
    ours, theirs = _lines(out)
    for line in (ours, theirs):
        assert isinstance(line["exception"], str)
        assert "ZeroDivisionError: division by zero" in line["exception"]
    assert ours["level"] == "error" and theirs["level"] == "error"


def test_exceptions_in_console_format():
    out = io.StringIO()
    configure_logging("info", "console", stream=out)
    try:
        raise KeyError("missing")
    except KeyError:
        structlog.get_logger("daemon.test").exception("job.failed")
    text = out.getvalue()
    assert "job.failed" in text
    assert "Traceback (most recent call last)" in text and "KeyError: 'missing'" in text


def test_idempotent_and_reconfigurable():
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=first)
    configure_logging("info", "json", stream=second)
    ours = [h for h in logging.getLogger().handlers if type(h).__module__ == "memoryd.daemon.logs"]
    assert len(ours) == 1
    structlog.get_logger("daemon.test").info("once")
    logging.getLogger("watchdog").warning("once too")
    assert first.getvalue() == ""
    assert [line["event"] for line in _lines(second)] == ["once", "once too"]


def test_module_level_logger_follows_reconfiguration():
    log = structlog.get_logger("daemon.test")  # as a module would hold it
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=first)
    log.info("a")
    configure_logging("info", "console", stream=second)
    log.info("b")
    assert [line["event"] for line in _lines(first)] == ["a"]
    assert "b" in second.getvalue() and not second.getvalue().startswith("{")


def test_default_stream_is_the_current_stderr(capsys):
    configure_logging("info", "json")
    structlog.get_logger("daemon.test").info("to.stderr")
    assert json.loads(capsys.readouterr().err)["event"] == "to.stderr"


@pytest.mark.parametrize(
    ("level", "fmt", "key"), [("verbose", "json", "log.level"), ("info", "xml", "log.format")]
)
def test_bad_values_name_the_config_key(level, fmt, key):
    with pytest.raises(ConfigError, match=key):
        configure_logging(level, fmt, stream=io.StringIO())
    assert not any(type(h).__module__ == "memoryd.daemon.logs" for h in logging.getLogger().handlers)


class _CountingPath:
    """A path value that counts how often a log processor reads it (the secret scrub does)."""

    def __init__(self) -> None:
        self.reads = 0

    def __fspath__(self) -> str:
        self.reads += 1
        return "/tmp/some/file.md"


def test_an_event_below_the_level_is_dropped_before_any_processor_runs():
    """search.done is a debug line on every query: at info it used to be time-stamped and scanned for
    secrets value by value (~0.17 ms a call) before the handler dropped it."""
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    value = _CountingPath()
    structlog.get_logger("daemon.test").debug("search.done", path=value)
    assert value.reads == 0 and out.getvalue() == ""
    structlog.get_logger("daemon.test").info("shown.info", path=value)
    assert value.reads > 0 and _lines(out)[0]["path"] == "/tmp/some/file.md"
