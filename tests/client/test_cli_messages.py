"""CLI messages that used to mislead a new user (issue #42): each names what went wrong and why."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.daemon.client import cli
from tests.helpers import running_daemon


def _own_lines(out: str) -> list[str]:
    """The command's own lines: the in-process daemon's log lines share the captured stdout."""
    return [line for line in out.splitlines() if not re.match(r"\d{4}-\d\d-\d\d[ T]", line)]


def test_reindex_names_each_path_not_indexed_and_wait_fails(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "s.sock"
    small = lambda cfg: dataclasses.replace(cfg, watch=dataclasses.replace(cfg.watch, max_file_bytes=2_000_000))  # noqa: E731
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n"}, tweak=small) as (_d, _c, root):
        (root / "big.md").write_text("x" * 3_000_000)
        (root / "notes.txt").write_text("plain\n")
        capsys.readouterr()
        assert cli.main(["reindex", "--socket", str(sock), str(root / "nope.md")]) == 0  # queued: no promise
        queued = _own_lines(capsys.readouterr().out)
        assert cli.main(["reindex", "--wait", "--socket", str(sock), str(root / "nope.md"),
                         str(root / "notes.txt"), str(root / "big.md"), str(root / "a.md")]) == 1
        waited = _own_lines(capsys.readouterr().out)
    assert queued[0] == "queued 1 file" and f"not indexed: {root}/nope.md: no such file" in queued[1]
    text = "\n".join(waited)
    assert f"not indexed: {root}/nope.md: no such file" in text
    assert f"not indexed: {root}/notes.txt: not a memory file: watch.include is *.md" in text
    assert f"not indexed: {root}/big.md: too-large: 3.0 MB > limit 2.0 MB (watch.max_file_bytes)" in text
    assert f"{root}/a.md" not in text  # the one that was indexed (or unchanged) is not listed


def test_reindex_wait_of_a_good_file_still_exits_0(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "s.sock"
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n"}) as (_d, _c, root):
        assert cli.main(["reindex", "--wait", "--socket", str(sock), str(root / "a.md")]) == 0
    assert "not indexed" not in capsys.readouterr().out


def test_history_of_a_path_that_names_nothing_says_so_and_fails(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "s.sock"
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\nalpha\n", "notes/b.md": "# B\n"}) as (_d, _c, root):
        capsys.readouterr()
        assert cli.main(["history", "--socket", str(sock), "nope/"]) == 1
        missing = capsys.readouterr()
        assert cli.main(["history", "--socket", str(sock), "a.md"]) == 0
        quiet_file = _own_lines(capsys.readouterr().out)
        assert cli.main(["history", "--socket", str(sock), "notes/"]) == 0
        quiet_dir = _own_lines(capsys.readouterr().out)
    assert missing.err.strip() == f"memoryd history: no memory file or folder 'nope/' under {root}"
    assert quiet_file == ["no history for a.md"] and quiet_dir == ["no history for notes/"]


def test_a_mistyped_command_gets_a_suggestion_not_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["serach", "x"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.splitlines()[-1] == "memoryd: error: argument COMMAND: invalid choice: 'serach'; did you mean 'search'?"
    assert "'reindex'" not in err and len(err.splitlines()) == 2  # the usage line and the error
    with pytest.raises(SystemExit):
        cli.main(["bank", "plann"])
    assert capsys.readouterr().err.endswith("did you mean 'plan'?\n")
    with pytest.raises(SystemExit):
        cli.main(["search", "--mode", "keywrd", "x"])  # a short list of values is still shown
    assert "(choose from 'hybrid', 'vector', 'keyword'); did you mean 'keyword'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "reindex" in capsys.readouterr().out  # --help still lists every command


def test_the_ready_hint_names_the_memoryd_that_runs(
        tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import structlog

    from memoryd.daemon.invocation import memoryd_command

    script = tmp_path / "venv" / "bin" / "memoryd"
    script.parent.mkdir(parents=True)
    script.write_text("")
    assert memoryd_command(str(script), which=lambda _n: None) == str(script)  # not on PATH: the full path
    assert memoryd_command(str(script), which=lambda _n: "/usr/bin/memoryd") == str(script)  # another one is
    assert memoryd_command(str(script), which=lambda _n: str(script)) == "memoryd"
    assert memoryd_command("/x/memoryd/__main__.py", which=lambda _n: None, executable="/v/python") == \
        "/v/python -m memoryd"

    monkeypatch.setattr(sys, "argv", [str(script), "run"])  # as `make run` starts it: .venv/bin/memoryd run
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with structlog.testing.capture_logs() as logs, running_daemon(tmp_path, short_dir / "s.sock", {"a.md": "a\n"}):
        pass
    ready = next(e for e in logs if e["event"] == "daemon.ready")
    assert ready["try_search"].startswith(f"{script} search --socket")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_prints_where_it_installed_memoryd() -> None:
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(["make", "-s", "-n", "-o", ".venv/.runtime", "run"], cwd=repo, capture_output=True,
                          text=True, timeout=60, check=True)
    assert f"installed at {repo}/.venv/bin/memoryd" in done.stdout
    assert f"in another terminal: {repo}/.venv/bin/memoryd search" in done.stdout


def test_a_second_agents_uninstall_says_nothing_to_remove(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "o3"\n')
    assert cli.main(["agents", "install", "codex", "--home", str(home)]) == 0
    assert cli.main(["agents", "uninstall", "codex", "--home", str(home)]) == 0
    capsys.readouterr()
    assert cli.main(["agents", "uninstall", "codex", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "already as memoryd writes it" not in out
    assert f"nothing to remove in {home}/.codex/config.toml" in out
    assert "codex: nothing to remove (0 files changed)" in out
