"""Output hygiene (issue "Trust", reproduction 11).

A file named ``\\e]0;PWNED\\a\\e[2J….md`` set the terminal title and cleared the
screen of whoever ran ``memoryd search``: the CLI printed names and content raw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.client import cli
from memoryd.daemon.client.termsafe import escape, escape_line
from tests.helpers import running_daemon

EVIL_NAME = "\x1b]0;PWNED\x07\x1b[2Jnotes.md"
EVIL_TEXT = ("# Deploy \x1b[31mred\x1b[0m\n\n- The zebracorn deploy runs on \x9b2J Fridays\u202e gnp.exe\r"
             "fake line\n\t- tabbed detail\n")
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_escape_spells_out_controls_and_keeps_layout() -> None:
    assert escape("a\x1b[2Jb\n\tc\x07\x9b\u202e") == "a\\x1b[2Jb\n\tc\\x07\\u009b\\u202e"
    assert escape_line("two\nlines\t") == "two\\nlines\\t"
    assert escape("plain 中文 ✓") == "plain 中文 ✓"


@pytest.fixture
def evil(tmp_path: Path, short_dir: Path) -> Iterator[Path]:
    with running_daemon(tmp_path, short_dir / "m.sock", {EVIL_NAME: EVIL_TEXT}) as (d, _client, _root):
        yield d.cfg.socket_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    with capture_logs():  # the in-process daemon's own log lines must not mix into the command's output
        code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_search_output_has_no_raw_escapes(evil: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _run(capsys, "search", "--socket", str(evil), "zebracorn deploy")
    assert not RAW.search(out), repr(out)
    assert "\\x1b]0;PWNED\\x07\\x1b[2Jnotes.md" in out  # the name is shown, escaped
    assert "\\u009b2J" in out


def test_get_and_context_keep_newlines_and_tabs_but_escape_the_rest(
    evil: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = _run(capsys, "get", "--socket", str(evil), EVIL_NAME)
    assert not RAW.search(out) and "\n\t- tabbed detail\n" in out and "\\x1b[31mred" in out
    out, _ = _run(capsys, "context", "--socket", str(evil), "--max-tokens", "200", "zebracorn deploy")
    assert not RAW.search(out)


def test_json_output_stays_valid_json_with_the_same_text(evil: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _run(capsys, "search", "--socket", str(evil), "--json", "zebracorn deploy")
    assert not RAW.search(out)
    hits = json.loads(out)["hits"]
    assert hits[0]["path"] == EVIL_NAME and "\x9b2J" in hits[0]["text"]  # exact data for programs


def test_error_messages_are_escaped(evil: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    with capture_logs():
        code = cli.main(["get", "--socket", str(evil), "missing\x1b[2J.md"])
    _, err = capsys.readouterr()
    assert code == 1 and not RAW.search(err) and "\\x1b[2J" in err


def test_status_output_has_no_raw_escapes(evil: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _run(capsys, "status", "--socket", str(evil))
    assert not RAW.search(out)
