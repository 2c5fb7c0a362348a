"""The CLI reads like a finished tool: help pages with examples, usage errors for bad values (exit 2),
quiet closed pipes, messages named once, ``status`` in words, ``reindex`` that says "unchanged",
and shell completion scripts."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client import cli
from memoryd.daemon.client.cli_completion import SHELLS, script
from memoryd.daemon.client.render import render_reindex, render_status
from memoryd.daemon.exits import EXIT_BROKEN_PIPE, EXIT_NOT_RUNNING, EXIT_USAGE
from memoryd.daemon.procstat import rss_bytes, tree_bytes
from memoryd.indexer.config import SEARCH_MODES
from tests.helpers import running_daemon, wait_for

REPO = Path(__file__).resolve().parents[2]


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "memoryd") -> Iterator[tuple[str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _subcommands(sub, f"{prefix} {name}")


def test_every_subcommand_help_has_a_description_and_an_example() -> None:
    pages = dict(_subcommands(cli.build_parser()))
    assert {"memoryd search", "memoryd bank plan", "memoryd service install", "memoryd completion"} <= set(pages)
    for name, sub in pages.items():
        assert sub.description and sub.description.endswith("."), name
        assert sub.epilog and sub.epilog.startswith("example"), name
        assert "  memoryd " in sub.format_help(), name  # an example to copy


def test_help_page_shows_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["reindex", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "\nRe-index files now (editor on-save hook).\n" in out and "example" in out
    assert "  memoryd reindex --wait" in out


def test_the_client_search_modes_are_the_configs() -> None:
    assert cli.SEARCH_MODES == SEARCH_MODES


@pytest.mark.parametrize("argv", [
    ["search", "--mode", "bogus", "x"],
    ["search", "-k", "0", "x"],
    ["context", "--max-tokens", "-5", "x"],
    ["history", "--limit", "many"],
    ["remember", "--type", "opinion", "x"],
    ["mcp", "--session", "nobody"],
    ["completion", "powershell"],
])
def test_invalid_values_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--socket", "/nonexistent/s.sock"] if argv[0] != "completion" else argv)
    assert exc.value.code == EXIT_USAGE
    assert "usage: memoryd" in capsys.readouterr().err


def test_not_running_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--socket", str(tmp_path / "none.sock")]) == EXIT_NOT_RUNNING
    err = capsys.readouterr().err
    assert err.startswith("memoryd is not running (no socket at ") and "memoryd: memoryd" not in err


def _closed_pipe_run(*args: str, unbuffered: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``memoryd ARGS`` with stdout a pipe whose reader is already gone (``| head`` that has quit).

    Buffered stdout (the default for a pipe) fails at the flush; unbuffered (``PYTHONUNBUFFERED``) at
    the first write: both must end quietly."""
    r, w = os.pipe()
    os.close(r)
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "PYTHONUNBUFFERED")}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", *args], cwd=REPO, stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=60, env=env, check=False)
    finally:
        os.close(w)


@pytest.mark.parametrize("unbuffered", [False, True])
def test_a_closed_pipe_is_quiet(unbuffered: bool) -> None:
    done = _closed_pipe_run("completion", "bash", unbuffered=unbuffered)
    assert done.stderr == "" and done.returncode == EXIT_BROKEN_PIPE, done.stderr


def test_help_into_a_closed_pipe_is_quiet() -> None:
    done = _closed_pipe_run("search", "--help")
    assert done.stderr == "" and done.returncode == EXIT_BROKEN_PIPE, done.stderr


def test_status_into_a_closed_pipe_is_quiet(tmp_path: Path, short_dir: Path) -> None:
    sock = short_dir / "s.sock"
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n"}):
        for unbuffered in (False, True):
            done = _closed_pipe_run("status", "--socket", str(sock), unbuffered=unbuffered)
            assert done.stderr == "" and done.returncode == EXIT_BROKEN_PIPE, (unbuffered, done.stderr)


def _not_logs(out: str) -> list[str]:
    """The command's own lines: the in-process daemon's log lines share the captured stdout."""
    return [line for line in out.splitlines() if not re.match(r"\d{4}-\d\d-\d\d[ T]", line)]


def test_status_speaks_words_and_shows_freshness_size_memory_and_socket(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "s.sock"
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n"}) as (_d, client, _root):
        st = client.call("status")
        assert cli.main(["status", "--socket", str(sock)]) == 0
    assert st["fresh"] is True and st["rss_bytes"] > 0 and st["data_dir_bytes"] > 0
    out = "\n".join(_not_logs(capsys.readouterr().out))
    rows = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in out.splitlines() if "  " in line}
    assert rows["fresh"].startswith("yes") and rows["reconciling"] == "no" and rows["last error"] == "none"
    assert rows["socket"] == str(sock) and str(tmp_path / "data") in rows["data dir"]
    assert rows["memory (RSS)"].endswith("MB") and rows["data dir"].endswith("B)")
    assert "None" not in out and "False" not in out and "True" not in out


def test_status_of_a_busy_daemon_says_why_it_is_not_fresh() -> None:
    st = {"pending": 3, "reconciling": True, "last_error": "disk full", "fresh": False,
          "model": {"id": "m", "dim": 8}, "index": {}, "cache": {"entries": 0, "hits": 0, "misses": 0}}
    out = render_status(st)
    assert "no (3 pending, reconciling)" in out and "disk full" in out and "unknown" in out


def test_status_says_which_storage_answers(tmp_path: Path, short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "s.sock", {"a.md": "# A\n\nalpha\n"}) as (d, client, _root):
        st = client.call("status")
    assert st["storage"] == {"backend": "embedded", "where": str(d.cfg.data_dir), "reachable": True}
    assert f"embedded index in {d.cfg.data_dir}" in render_status(st)


def test_reindex_wait_on_an_unchanged_file_says_unchanged(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "s.sock"
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n"}) as (_d, _client, root):
        assert cli.main(["reindex", "--wait", "--socket", str(sock), str(root / "a.md")]) == 0
        first = _not_logs(capsys.readouterr().out)[-1]
        (root / "a.md").write_text("# A\n\nalpha beta\n")
        assert cli.main(["reindex", "--wait", "--socket", str(sock), str(root / "a.md")]) == 0
        second = _not_logs(capsys.readouterr().out)[-1]
    assert first.startswith("unchanged: 1 file") and "reindexed 0" not in first
    assert second.startswith("reindexed 1 file")


def test_reindex_wording() -> None:
    assert render_reindex({"done": True, "files": 2, "unchanged": 3, "took_ms": 4}) == \
        "reindexed 2 files, 3 unchanged (4 ms)"
    assert render_reindex({"done": True, "removed": 1}) == "1 removed (0 ms)"
    assert render_reindex({"done": True}) == "nothing to index (0 ms)"


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_scripts_know_commands_and_choices(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", shell]) == 0
    text = capsys.readouterr().out
    assert text == script(cli.build_parser(), shell)
    for word in ("search", "reindex", "completion", "keyword", "--max-tokens"):
        assert word in text, (shell, word)


def test_bash_completion_completes_commands_and_choices(tmp_path: Path) -> None:
    path = tmp_path / "memoryd.bash"
    path.write_text(script(cli.build_parser(), "bash"))
    probe = (f'source "{path}"\n'
             'COMP_WORDS=(memoryd search --mode ""); COMP_CWORD=3; _shtab_memoryd memoryd "" --mode\n'
             'echo "${COMPREPLY[*]}"\n'
             'COMP_WORDS=(memoryd re); COMP_CWORD=1; _shtab_memoryd memoryd re memoryd\n'
             'echo "${COMPREPLY[*]}"\n'
             'COMP_WORDS=(memoryd status --config co); COMP_CWORD=3; _shtab_memoryd memoryd co --config\n'
             'echo "${COMPREPLY[*]}"\n'
             'COMP_WORDS=(memoryd run --root n); COMP_CWORD=3; _shtab_memoryd memoryd n --root\n'
             'echo "${COMPREPLY[*]}"\n')
    work = tmp_path / "cwd"
    (work / "notes").mkdir(parents=True)
    (work / "conf.toml").write_text("")
    (work / "note.md").write_text("")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=False, cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hybrid vector keyword", "reindex remember", "conf.toml", "notes"]


def test_daemon_ready_is_one_log_event_with_the_hints(tmp_path: Path, short_dir: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import structlog

    sock = short_dir / "s.sock"
    with structlog.testing.capture_logs() as logs, running_daemon(tmp_path, sock, {"a.md": "alpha\n"}):
        wait_for(lambda: any(e["event"] == "daemon.ready" for e in logs), what="daemon.ready")
    ready = next(e for e in logs if e["event"] == "daemon.ready")
    assert ready["try_search"].startswith(f"memoryd search --socket {sock}")
    assert "try:" not in capsys.readouterr().err  # no plain-text banner beside the log stream


def test_procstat_reads_rss_and_sums_a_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub" / "b").write_bytes(b"y" * 5)
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert tree_bytes(tmp_path) == 15 and tree_bytes(tmp_path / "missing") is None
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  2048 kB\n")
    assert rss_bytes(status) == 2048 * 1024 and rss_bytes(tmp_path / "none") is None
