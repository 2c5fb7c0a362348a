"""The capture hooks `memoryd agents install` adds (daemon/client/agents_capture.py), beside the user's own."""

from __future__ import annotations

import json
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.daemon.client import cli
from memoryd.daemon.client.agents_capture import CLAUDE_EVENTS, OPENCLAW_HOOK

EXE = str(Path(sys.executable).parent / "memoryd")
USER_STOP = {"type": "command", "command": "~/bin/notify-done.sh"}


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".openclaw" / "workspace").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [USER_STOP]}]}}))
    return home


def _agents(*argv: str) -> int:
    return cli.main(["agents", *argv])


def test_claude_code_gets_stop_precompact_and_sessionend_capture_beside_the_users_hooks(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert _agents("install", "claude-code", "--home", str(home)) == 0
    hooks = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    for event in CLAUDE_EVENTS:
        commands = [h["command"] for g in hooks[event] for h in g["hooks"]]
        assert shlex.join([EXE, "observe", "--hook", "claude-code"]) in commands, event
    assert hooks["Stop"][0]["hooks"] == [USER_STOP]  # the user's Stop hook, first and untouched
    assert "UserPromptSubmit" in hooks  # the context hook is still installed beside them
    assert _agents("uninstall", "claude-code", "--home", str(home)) == 0
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {"hooks": {"Stop": [{"hooks": [USER_STOP]}]}}


def test_codex_notify_is_added_updated_in_place_and_a_foreign_one_is_left_with_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    config = home / ".codex" / "config.toml"
    config.write_text('model = "o4-mini"\nnotify = ["/old/bin/memoryd", "observe", "--hook", "codex"]\n')
    assert _agents("install", "codex", "--home", str(home)) == 0
    data = tomllib.loads(config.read_text())
    assert data["notify"] == [EXE, "observe", "--hook", "codex"] and data["model"] == "o4-mini"
    assert config.read_text().count("notify =") == 1
    config.write_text('notify = ["python3", "/home/u/notify.py"]\n')
    capsys.readouterr()
    assert _agents("install", "codex", "--home", str(home)) == 0
    assert tomllib.loads(config.read_text())["notify"] == ["python3", "/home/u/notify.py"]
    assert "Codex runs one notify program" in capsys.readouterr().out
    assert _agents("uninstall", "codex", "--home", str(home)) == 0
    assert tomllib.loads(config.read_text())["notify"] == ["python3", "/home/u/notify.py"]


def test_openclaw_gets_a_managed_hook_that_runs_the_absolute_memoryd(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    assert _agents("install", "openclaw", "--home", str(home)) == 0
    folder = home / ".openclaw" / "hooks" / OPENCLAW_HOOK
    meta = (folder / "HOOK.md").read_text()
    assert '"events": ["command:new", "command:reset", "command:stop", "session:compact:before"]' in meta
    handler = (folder / "handler.ts").read_text()
    assert f"const MEMORYD = {json.dumps(EXE)};" in handler and '"observe", "--hook", "openclaw"' in handler
    assert "detached: true" in handler and "child.unref()" in handler
    assert f"openclaw hooks enable {OPENCLAW_HOOK}" in capsys.readouterr().out
    assert _agents("uninstall", "openclaw", "--home", str(home)) == 0
    assert not (folder / "HOOK.md").exists() and not (folder / "handler.ts").exists()


def test_the_installed_commands_are_what_the_cli_accepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.daemon.client.cli_observe import hook_main

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    parsed = cli.build_parser().parse_args(["observe", "--hook", "codex", '{"type": "x"}'])
    assert parsed.hook == "codex"
    assert hook_main(["--hook", "codex", '{"type": "not-a-turn"}']) == 0  # a foreign event: ignored, exit 0
    assert "observe_hook.bad_event" in (tmp_path / "observe-hook.log").read_text()  # said in the log, not to the agent


def test_a_projects_capture_hook_names_a_bare_memoryd_like_its_other_hooks(tmp_path: Path) -> None:
    home, project = _home(tmp_path), tmp_path / "proj"
    project.mkdir()
    assert _agents("install", "claude-code", "--home", str(home), "--project", str(project)) == 0
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert [h["command"] for g in hooks["Stop"] for h in g["hooks"]] == ["memoryd observe --hook claude-code"]
