"""The agent-integration snippets in config/agents/ (docs/agents.md shows them): each one parsed as its host
parses it, its command checked against the installed memoryd, and the Claude Code hook run for real (slow)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from datetime import date
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client import cli
from memoryd.daemon.client.mcp_tools import BY_NAME
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer import config as memoryd_config
from memoryd.indexer.write.router import RULES
from tests.helpers import running_daemon

REPO = Path(__file__).resolve().parents[2]
AGENTS = Path(str(files("memoryd.config"))) / "agents"
BIN = Path(sys.executable).parent  # the venv the tests run in: where `memoryd` is installed
HOOK = AGENTS / "memoryd-context-hook.py"
SNIPPETS = ("mcp.json", "claude-settings.json", "CLAUDE.md", "codex.toml", "AGENTS.md", "openclaw.toml")


def text(name: str) -> str:
    return (AGENTS / name).read_text()


def assert_starts_memoryd_mcp(command: str, args: list[str]) -> None:
    """``command`` is the installed memoryd script and the real CLI parses ``args`` as ``memoryd mcp``."""
    assert (BIN / command).is_file() and os.access(BIN / command, os.X_OK), f"{command} is not in {BIN}"
    parsed = cli.build_parser().parse_args(args)
    assert parsed.command == "mcp"


def test_the_doc_shows_every_snippet_verbatim() -> None:
    doc = (REPO / "docs/agents.md").read_text()
    for name in SNIPPETS:
        assert text(name).rstrip("\n") in doc, f"docs/agents.md differs from config/agents/{name}"


def test_mcp_json_starts_memoryd_mcp() -> None:
    server = json.loads(text("mcp.json"))["mcpServers"]["memoryd"]
    assert set(server) == {"command", "args"}
    assert_starts_memoryd_mcp(server["command"], server["args"])


def test_codex_toml_starts_memoryd_mcp_with_room_for_a_write() -> None:
    server = tomllib.loads(text("codex.toml"))["mcp_servers"]["memoryd"]
    assert_starts_memoryd_mcp(server["command"], server["args"])
    assert server["startup_timeout_sec"] >= 10 and server["tool_timeout_sec"] >= 90  # mcp_server.CALL_TIMEOUT_S


def test_claude_settings_register_the_shipped_hook_on_user_prompt_submit() -> None:
    (entry,) = json.loads(text("claude-settings.json"))["hooks"]["UserPromptSubmit"]
    (hook,) = entry["hooks"]
    assert hook["type"] == "command" and 0 < hook["timeout"] <= 60
    program, *args = shlex.split(hook["command"])
    assert Path(program).name == HOOK.name and os.access(HOOK, os.X_OK)
    assert HOOK.read_text().startswith("#!/usr/bin/env python3\n")
    assert args == ["--max-tokens", "800"]


def test_instructions_name_only_tools_that_exist() -> None:
    for name in ("CLAUDE.md", "AGENTS.md"):
        named = set(re.findall(r"`(memory_\w+)`", text(name)))
        assert named and named <= set(BY_NAME), name


def test_openclaw_config_loads_and_indexes_memory_but_not_the_workspace_files(tmp_path: Path) -> None:
    path = tmp_path / "memoryd.toml"
    path.write_text(text("openclaw.toml"))
    cfg = memoryd_config.load(path, env={})
    assert list(cfg.watch.roots) == [Path("~/.openclaw/workspace").expanduser()]
    accept = PathFilter(cfg.watch.include, cfg.watch.exclude)
    written = [r.target.format(date=date(2026, 1, 2).isoformat()) for r in RULES]  # where memory_remember writes
    for rel in ["MEMORY.md", "memory/2026-01-02.md", "peers/alice/MEMORY.md", "groups/team/memory/2026-01-02.md",
                *written, *(f"agents/bot/{w}" for w in written)]:
        assert accept(rel), rel
    for rel in ["AGENTS.md", "SOUL.md", "TOOLS.md", "skills/web/SKILL.md", "memory/.git/x.md"]:
        assert not accept(rel), rel


# -- the hook, run as Claude Code runs it ------------------------------------------------------


def run_hook(event: Any, *flags: str) -> subprocess.CompletedProcess[str]:
    stdin = event if isinstance(event, str) else json.dumps(event)
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent-memoryd-test"}
    return subprocess.run([sys.executable, str(HOOK), "--memoryd", str(BIN / "memoryd"), *flags], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.mark.slow
def test_the_hook_prints_the_context_block_for_the_prompt(tmp_path: Path, short_dir: Path) -> None:
    files_ = {"memory/2026-01-02.md": "# 2026-01-02\n\n- The zebracorn migration moves every service to the new "
                                      "queue by March.\n",
              "MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n"}
    with running_daemon(tmp_path, short_dir / "m.sock", files_, timeout=20) as (d, _client, _root):
        sock = str(d.cfg.socket_path)
        event = {"session_id": "abc", "transcript_path": "/tmp/t.jsonl", "cwd": str(tmp_path),
                 "hook_event_name": "UserPromptSubmit", "prompt": "When does the zebracorn migration finish?"}
        done = run_hook(event, "--socket", sock, "--max-tokens", "300")
        assert done.returncode == 0 and done.stderr == ""
        assert done.stdout.startswith("## Relevant memories") and "zebracorn migration moves" in done.stdout
        assert "memory/2026-01-02.md:" in done.stdout
        dash = run_hook({**event, "prompt": "--help me with the zebracorn migration"}, "--socket", sock)
        assert dash.returncode == 0 and "zebracorn" in dash.stdout  # a prompt is never read as a flag
    for bad in ("not json", {"prompt": ""}, {"prompt": 42}, ["a list"]):
        quiet = run_hook(bad, "--socket", sock)
        assert (quiet.returncode, quiet.stdout) == (0, ""), bad


@pytest.mark.slow
def test_the_hook_stays_silent_without_a_daemon(short_dir: Path) -> None:
    done = run_hook({"prompt": "When does the zebracorn migration finish?"}, "--socket", str(short_dir / "no.sock"))
    assert (done.returncode, done.stdout) == (0, "")
