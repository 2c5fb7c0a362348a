"""``memoryd agents install|uninstall``: against the hosts' real file formats, with other content already there.

Each fixture is what a user's machine holds before memoryd touches it: a Claude Code ``settings.json``
with other hooks and permissions, a Codex ``config.toml`` with other servers, sub-tables and comments, an
OpenClaw ``openclaw.json`` with other servers. The install must merge into them, produce docs/agents.md's
snippets with absolute paths, change nothing when run twice, and uninstall back to the original.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.daemon.client import agents_install, cli, cli_onboard
from memoryd.daemon.client.agents_install import HOOK_NAME, Where, plan, snippet
from memoryd.daemon.client.setup_files import SetupError, replace_toml_table

BIN = Path(sys.executable).parent
EXE = str(BIN / "memoryd")

CLAUDE_SETTINGS = """{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},
  "hooks": {
    "UserPromptSubmit": [
      {"hooks": [{"type": "command", "command": "~/bin/date-context.sh", "timeout": 5}]}
    ],
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}
    ]
  }
}
"""

CLAUDE_JSON = """{
  "numStartups": 34,
  "theme": "dark",
  "projects": {"/home/u/app": {"allowedTools": [], "mcpServers": {}}},
  "mcpServers": {
    "github": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {}}
  }
}
"""

CODEX = """# ~/.codex/config.toml
model = "o4-mini"
approval_policy = "on-request"

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp_servers.github.env]
GITHUB_TOKEN = "ghp_example"  # read from the keychain in real life

# Profiles below.
[profiles.fast]
model = "gpt-4.1-mini"
"""

OPENCLAW = """{
  "agents": {"defaults": {"workspace": "~/.openclaw/workspace", "model": "anthropic/claude-sonnet-4"}},
  "mcp": {"servers": {"context7": {"command": "npx", "args": ["-y", "@upstash/context7-mcp"]}}}
}
"""


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".openclaw" / "workspace").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    (home / ".codex" / "config.toml").write_text(CODEX)
    (home / ".openclaw" / "openclaw.json").write_text(OPENCLAW)
    (home / ".openclaw" / "workspace" / "AGENTS.md").write_text("# Workspace rules\n\nBe brief.\n")
    return home


def _run(*argv: str) -> int:
    return cli.main(["agents", *argv])


def _snapshot(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): p.read_text() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(".bak")}


def test_hosts_are_the_same_list_in_the_parser_and_the_installer() -> None:
    assert cli_onboard.HOSTS == agents_install.HOSTS


def test_claude_code_install_merges_hook_server_and_instructions(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert _run("install", "claude-code", "--home", str(home)) == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    # the user's own hooks and keys are all still there, in their order
    assert settings["model"] == "opus" and settings["permissions"]["allow"] == ["Bash(npm test:*)"]
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    groups = settings["hooks"]["UserPromptSubmit"]
    assert groups[0]["hooks"][0]["command"] == "~/bin/date-context.sh"
    (ours,) = [h for g in groups for h in g["hooks"] if HOOK_NAME in h["command"]]
    shipped = json.loads(snippet("claude-settings.json"))["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert ours["type"] == shipped["type"] and ours["timeout"] == shipped["timeout"]
    python, script, *args = shlex.split(ours["command"])
    assert python == os.path.abspath(sys.executable) and Path(script) == home / ".claude" / "hooks" / HOOK_NAME
    assert args == ["--memoryd", EXE, *shlex.split(shipped["command"])[1:]]  # the doc's --max-tokens 800
    assert Path(script).read_text() == snippet(HOOK_NAME) and os.access(script, os.X_OK)
    state = json.loads((home / ".claude.json").read_text())
    assert state["numStartups"] == 34 and "github" in state["mcpServers"] and "/home/u/app" in state["projects"]
    server = state["mcpServers"]["memoryd"]
    assert server == {"type": "stdio", "command": EXE, "args": json.loads(snippet("mcp.json"))["mcpServers"][
        "memoryd"]["args"], "env": {}}
    cli.build_parser().parse_args(server["args"])  # the real CLI takes what the host will run
    assert snippet("CLAUDE.md").strip() in (home / ".claude" / "CLAUDE.md").read_text()
    assert (home / ".claude" / "settings.json.bak").read_text() == CLAUDE_SETTINGS  # the old file, once


def test_a_second_install_changes_nothing_and_uninstall_gives_the_files_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    before = _snapshot(home)
    for host in agents_install.HOSTS:
        assert _run("install", host, "--home", str(home)) == 0
    installed = _snapshot(home)
    baks = {p: p.stat().st_mtime_ns for p in home.rglob("*.bak")}
    capsys.readouterr()
    for host in agents_install.HOSTS:
        assert _run("install", host, "--home", str(home)) == 0
        assert f"{host}: installed (0 files changed)" in capsys.readouterr().out
    assert _snapshot(home) == installed and {p: p.stat().st_mtime_ns for p in home.rglob("*.bak")} == baks
    for host in agents_install.HOSTS:
        assert _run("uninstall", host, "--home", str(home)) == 0
    after = _snapshot(home)
    after.pop(".config/memoryd/memoryd.toml")  # openclaw's memoryd config stays: it is memoryd's own
    for name in (".claude/settings.json", ".claude.json", ".openclaw/openclaw.json"):  # re-serialised JSON
        assert json.loads(after.pop(name)) == json.loads(before.pop(name)), name
    assert after == before  # TOML and Markdown: byte for byte; hook script and instruction files gone


def test_codex_install_keeps_the_other_servers_and_comments_byte_for_byte(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert _run("install", "codex", "--home", str(home)) == 0
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(CODEX)  # every line of the user's file, comments included, untouched
    config = tomllib.loads(text)
    assert config["mcp_servers"]["github"]["env"] == {"GITHUB_TOKEN": "ghp_example"}
    expected = tomllib.loads(snippet("codex.toml"))["mcp_servers"]["memoryd"]
    assert config["mcp_servers"]["memoryd"] == {**expected, "command": EXE}
    assert snippet("AGENTS.md").strip() in (home / ".codex" / "AGENTS.md").read_text()


def test_codex_reinstall_replaces_a_stale_command_in_place(tmp_path: Path) -> None:
    home = _home(tmp_path)
    stale = CODEX + '\n[mcp_servers.memoryd]\ncommand = "memoryd"\nargs = ["mcp"]\n\n[other]\nx = 1\n'
    (home / ".codex" / "config.toml").write_text(stale)
    assert _run("install", "codex", "--home", str(home)) == 0
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"]["memoryd"]["command"] == EXE and config["other"] == {"x": 1}


def test_openclaw_install_registers_the_server_and_writes_a_workspace_config(tmp_path: Path) -> None:
    home = _home(tmp_path)
    config = tmp_path / "cfg" / "memoryd.toml"
    assert _run("install", "openclaw", "--home", str(home), "--config", str(config)) == 0
    registry = json.loads((home / ".openclaw" / "openclaw.json").read_text())
    assert registry["mcp"]["servers"]["memoryd"] == {"command": EXE, "args": ["mcp"]}
    assert "context7" in registry["mcp"]["servers"] and registry["agents"]["defaults"]["model"]
    agents_md = (home / ".openclaw" / "workspace" / "AGENTS.md").read_text()
    assert agents_md.startswith("# Workspace rules\n\nBe brief.\n") and snippet("AGENTS.md").strip() in agents_md
    from memoryd.indexer import config as configmod

    cfg = configmod.load(config, env={})
    assert cfg.watch.roots == (home / ".openclaw" / "workspace",)
    assert cfg.watch.include == tuple(tomllib.loads(snippet("openclaw.toml"))["watch"]["include"])
    assert config.stat().st_mode & 0o777 == 0o600  # every file memoryd creates is 0600 (#38 item 13)


def test_openclaw_leaves_an_existing_memoryd_config_and_says_what_to_add(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    config = tmp_path / "memoryd.toml"
    config.write_text('[watch]\nroots = ["/srv/notes"]\n')
    assert _run("install", "openclaw", "--home", str(home), "--config", str(config)) == 0
    assert config.read_text() == '[watch]\nroots = ["/srv/notes"]\n'
    assert "is left as it is" in capsys.readouterr().out


@pytest.mark.parametrize(("host", "name", "broken"), [
    ("claude-code", ".claude/settings.json", '{"hooks": {,}'),
    ("claude-code", ".claude.json", "[1, 2]"),
    ("codex", ".codex/config.toml", "[mcp_servers\nbroken"),
    ("openclaw", ".openclaw/openclaw.json", "{ // JSON5 comment\n  mcp: {} }"),
])
def test_a_file_that_does_not_parse_is_named_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, name: str, broken: str) -> None:
    home = _home(tmp_path)
    (home / name).write_text(broken)
    before = _snapshot(home)
    assert _run("install", host, "--home", str(home)) == 1
    err = capsys.readouterr().err
    assert str(home / name) in err and "nothing was changed" in err
    assert _snapshot(home) == before and not list(home.rglob("*.bak"))


def test_dry_run_shows_the_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    before = _snapshot(home)
    assert _run("install", "codex", "--home", str(home), "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"would update {home / '.codex' / 'config.toml'}" in out and f'+command = "{EXE}"' in out
    assert _snapshot(home) == before


def test_claude_code_project_scope_writes_the_projects_files(tmp_path: Path) -> None:
    home, project = _home(tmp_path), tmp_path / "app"
    project.mkdir()
    assert _run("install", "claude-code", "--home", str(home), "--project", str(project)) == 0
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["memoryd"]["command"] == "memoryd"
    assert HOOK_NAME in (project / ".claude" / "settings.json").read_text()
    assert (project / "CLAUDE.md").is_file() and (project / ".claude" / "hooks" / HOOK_NAME).is_file()
    assert "memoryd" not in json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert not (home / ".claude" / "hooks" / HOOK_NAME).exists()  # the project's hook lives in the project
    assert _run("uninstall", "claude-code", "--home", str(home), "--project", str(project)) == 0
    assert not (project / ".mcp.json").exists() and not (project / "CLAUDE.md").exists()
    assert not (project / ".claude" / "hooks" / HOOK_NAME).exists()


def test_a_projects_shared_files_name_no_path_of_the_installers_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """#42 item 6: .mcp.json and .claude/settings.json are committed; another machine has no such home."""
    home, project = _home(tmp_path), tmp_path / "app"
    project.mkdir()
    monkeypatch.setattr(cli_onboard.shutil, "which", lambda _name: EXE)
    assert _run("install", "claude-code", "--home", str(home), "--project", str(project)) == 0
    assert "not on PATH" not in capsys.readouterr().out
    shared = {p: p.read_text() for p in [project / ".mcp.json", project / ".claude" / "settings.json"]}
    for path, text in shared.items():
        for machine_path in (str(home), str(tmp_path), str(BIN), sys.executable):
            assert machine_path not in text, (path, machine_path)
    settings = json.loads(shared[project / ".claude" / "settings.json"])
    (command,) = [h["command"] for g in settings["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert command == (f'python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/{HOOK_NAME}" --memoryd memoryd '
                       "--max-tokens 800")


def test_a_project_install_without_memoryd_on_path_says_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = _home(tmp_path), tmp_path / "app"
    project.mkdir()
    monkeypatch.setattr(cli_onboard.shutil, "which", lambda _name: None)
    assert _run("install", "claude-code", "--home", str(home), "--project", str(project)) == 0
    out = capsys.readouterr().out
    assert "note: 'memoryd' is not on PATH here, so this project's agent cannot start it" in out
    assert "pipx install" in out
    assert _run("install", "claude-code", "--home", str(home)) == 0  # the user's own files keep absolute paths
    assert "not on PATH" not in capsys.readouterr().out


def test_uninstall_leaves_a_server_named_memoryd_that_is_not_memoryd_mcp(tmp_path: Path) -> None:
    home = _home(tmp_path)
    theirs = {"command": "/opt/other/server", "args": ["--x"]}
    data = json.loads(CLAUDE_JSON)
    data["mcpServers"]["memoryd"] = theirs
    (home / ".claude.json").write_text(json.dumps(data))
    changes, _notes = plan("claude-code", Where(home=home, exe=EXE, python=sys.executable), install=False)
    server_change = next(c for c in changes if c.path == home / ".claude.json")
    assert not server_change.changed


def test_a_toml_table_defined_inline_is_refused(tmp_path: Path) -> None:
    text = 'mcp_servers = { memoryd = { command = "x", args = [] } }\n'
    with pytest.raises(SetupError, match=r"without a \[mcp_servers.memoryd\] header"):
        replace_toml_table(tmp_path / "c.toml", text, "mcp_servers.memoryd", '[mcp_servers.memoryd]\ncommand = "y"\n')


@pytest.mark.slow
def test_the_installed_hook_command_runs_as_claude_code_runs_it(tmp_path: Path, short_dir: Path) -> None:
    """The command written into settings.json, run through a shell with no PATH, prints the context block."""
    import subprocess

    from tests.helpers import running_daemon

    home = _home(tmp_path)
    assert _run("install", "claude-code", "--home", str(home)) == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    (command,) = [h["command"] for g in settings["hooks"]["UserPromptSubmit"] for h in g["hooks"]
                  if HOOK_NAME in h["command"]]
    files = {"memory/2026-01-02.md": "# 2026-01-02\n\n- The zebracorn migration ends in March.\n"}
    with running_daemon(tmp_path, short_dir / "h.sock", files, timeout=20) as (d, _client, _root):
        xdg = tmp_path / "xdg"
        (xdg / "memoryd").mkdir(parents=True)
        (xdg / "memoryd" / "memoryd.toml").write_text(f'[server]\nsocket = "{d.cfg.socket_path}"\n')
        event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "When does the zebracorn migration end?"})
        done = subprocess.run(command, shell=True, input=event, capture_output=True, text=True, timeout=60,
                              env={"HOME": str(home), "XDG_CONFIG_HOME": str(xdg), "PATH": "/nonexistent"},
                              check=False)
    assert done.returncode == 0 and done.stderr == ""
    assert "zebracorn migration ends" in done.stdout and "memory/2026-01-02.md:" in done.stdout
