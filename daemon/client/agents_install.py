"""``memoryd agents install|uninstall claude-code|codex|openclaw``: docs/agents.md's wiring, written for you.

Each host gets what docs/agents.md shows (the snippets in ``config/agents/``),
with absolute paths instead of bare names, since hosts start their MCP servers
and hooks without the user's shell ``PATH``: the ``memoryd`` beside the running
interpreter, and that interpreter for the hook script. A project's files
(``claude-code --project DIR``) are the exception: they are committed and shared
with the team, so an absolute path into the installer's home would be wrong on
every other machine. They name a bare ``memoryd`` (and ``python3`` for a hook
script kept in the project, found through ``$CLAUDE_PROJECT_DIR``), and the
install says so when ``memoryd`` is not on this machine's ``PATH``.

- **claude-code**: the MCP server in ``~/.claude.json`` (``mcpServers.memoryd``, what
  ``claude mcp add --scope user`` writes; ``--project DIR``: ``DIR/.mcp.json``), the
  ``UserPromptSubmit`` hook in ``~/.claude/settings.json`` (``DIR/.claude/settings.json``)
  running the shipped ``memoryd-context-hook.py`` copied to ``~/.claude/hooks/``, and the
  instructions in ``~/.claude/CLAUDE.md`` (``DIR/CLAUDE.md``).
- **codex**: ``[mcp_servers.memoryd]`` in ``~/.codex/config.toml`` and the instructions in
  ``~/.codex/AGENTS.md``. Codex has no per-prompt hook; the tools are its way in.
- **openclaw**: ``mcp.servers.memoryd`` in ``~/.openclaw/openclaw.json``, the instructions in
  the workspace's ``AGENTS.md``, and, when there is no memoryd config yet, one that indexes the
  workspace's memory (``config/agents/openclaw.toml``). An existing memoryd config is never
  rewritten: what to add is printed instead.

Install is idempotent (a second run plans no change) and uninstall removes only
what install writes: the ``memoryd`` entries, the hook whose command runs
``memoryd-context-hook.py``, the instruction blocks between memoryd's marker lines,
and the hook script when it is still the shipped one. The file editing rules
(parse first, refuse what does not parse, keep every other key, ``.bak`` once,
atomic writes) are :mod:`memoryd.daemon.client.setup_files`'.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from memoryd.daemon.client.agents_capture import codex_notify, openclaw_changes, set_claude_capture
from memoryd.daemon.client.setup_files import (
    Change,
    SetupError,
    child,
    dump_json_like,
    load_json_object,
    marked_block,
    parse_toml,
    place_command_hook,
    read_text,
    replace_marked_block,
    replace_toml_table,
)

HOSTS = ("claude-code", "codex", "openclaw")
HOOK_NAME = "memoryd-context-hook.py"
HOOK_TIMEOUT_S = 15  # config/agents/claude-settings.json
HOOK_MAX_TOKENS = 800
SERVER = "memoryd"
BEGIN = "<!-- memoryd:begin (written by 'memoryd agents install'; 'memoryd agents uninstall' removes it) -->"
END = "<!-- memoryd:end -->"
CODEX_TABLE = "mcp_servers.memoryd"


@dataclass(frozen=True)
class Where:
    """Every path an install touches, and the programs it names: all given, so tests need no real home."""

    home: Path
    exe: str  # the memoryd command, absolute
    python: str  # the interpreter that runs the hook script, absolute
    project: Path | None = None  # claude-code: a project's files instead of the user's
    on_path: str | None = "memoryd"  # what a bare ``memoryd`` runs here (``shutil.which``); None: not on PATH
    workspace: Path | None = None  # openclaw: the agent workspace (default ~/.openclaw/workspace)
    config: Path | None = None  # openclaw: the memoryd config to create when absent


def snippet(name: str) -> str:
    """A shipped file of ``config/agents/`` (the text docs/agents.md shows)."""
    return files("memoryd.config").joinpath("agents", name).read_text(encoding="utf-8")


def plan(host: str, where: Where, install: bool) -> tuple[list[Change], list[str]]:
    """The changes an install (or uninstall) of ``host`` makes, and notes to print; writes nothing."""
    planners: dict[str, Callable[[Where, bool], tuple[list[Change], list[str]]]] = {
        "claude-code": _claude, "codex": _codex, "openclaw": _openclaw}
    if host not in planners:
        raise SetupError(f"unknown agent host {host!r}; one of {', '.join(HOSTS)}")
    return planners[host](where, install)


# -- Claude Code -----------------------------------------------------------------------------


PROJECT_EXE = "memoryd"  # what a project's shared files run: whoever opens the project has their own memoryd
PROJECT_HOOK = f'python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/{HOOK_NAME}"'  # Claude Code sets it for hooks


def hook_command(where: Where, hook: Path) -> str:
    if where.project is not None:
        return f"{PROJECT_HOOK} " + shlex.join(["--memoryd", PROJECT_EXE, "--max-tokens", str(HOOK_MAX_TOKENS)])
    return shlex.join([where.python, str(hook), "--memoryd", where.exe, "--max-tokens", str(HOOK_MAX_TOKENS)])


def claude_mcp_entry(where: Where) -> dict[str, Any]:
    """What ``claude mcp add memoryd -- /abs/memoryd mcp`` writes (a bare ``memoryd`` in a project's file)."""
    return {"type": "stdio", "command": PROJECT_EXE if where.project is not None else where.exe, "args": ["mcp"],
            "env": {}}


def not_on_path_note(exe: str) -> str:
    """What to do when the project's bare ``memoryd`` would not start here."""
    return (f"'memoryd' is not on PATH here, so this project's agent cannot start it: the project's files name a "
            f"bare 'memoryd' (they are shared; {exe} is this machine's). Put it on PATH: pipx install <memoryd "
            f"checkout> (or uv tool install), or ln -s {exe} ~/.local/bin/memoryd")


def _claude(where: Where, install: bool) -> tuple[list[Change], list[str]]:
    base = where.project
    hook = (base if base else where.home) / ".claude" / "hooks" / HOOK_NAME
    settings = (base / ".claude" / "settings.json") if base else where.home / ".claude" / "settings.json"
    servers = (base / ".mcp.json") if base else where.home / ".claude.json"
    memo = (base / "CLAUDE.md") if base else where.home / ".claude" / "CLAUDE.md"
    shipped_hook = snippet(HOOK_NAME)
    old_hook = read_text(hook)
    if install:
        hook_change = Change(hook, old_hook, shipped_hook, "the context hook script", mode=0o755)
    else:  # a hook script the user changed is theirs now
        hook_change = Change(hook, old_hook, None if old_hook == shipped_hook else old_hook, "the context hook script")
    changes = [
        _json_edit(servers, "the MCP server memoryd",
                   lambda d: _set_server(d, ["mcpServers"], claude_mcp_entry(where) if install else None, servers)),
        hook_change,
        _json_edit(settings, "the UserPromptSubmit hook and the capture hooks (Stop, PreCompact, SessionEnd)",
                   lambda d: _set_hooks(d, where, hook, install, settings)),
        _block_edit(memo, snippet("CLAUDE.md") if install else None, "the memoryd instructions"),
    ]
    notes = [] if install or old_hook in (None, shipped_hook) else [
        f"kept {hook}: it differs from the shipped hook (yours now); remove it yourself if you want it gone"]
    if install and base is not None and where.on_path is None:
        notes.append(not_on_path_note(where.exe))
    return changes, notes


def _set_hooks(data: dict[str, Any], where: Where, hook: Path, install: bool, path: Path) -> None:
    """The context hook and the capture hooks (daemon/client/agents_capture.py), in one edit of ``path``."""
    _set_hook(data, hook_command(where, hook) if install else None, path)
    exe = PROJECT_EXE if where.project is not None else where.exe  # a project's shared file: a bare memoryd
    set_claude_capture(data, exe if install else None, path)


def _set_hook(data: dict[str, Any], command: str | None, path: Path) -> None:
    """Put our ``UserPromptSubmit`` command hook in place (or remove it), leaving every other hook as it is."""
    hooks = child(data, "hooks", path)
    ours = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S} if command else None
    place_command_hook(hooks, "UserPromptSubmit", ours, lambda cmd: HOOK_NAME in str(cmd), path)
    _prune(data, "hooks")


def _set_server(data: dict[str, Any], keys: list[str], entry: dict[str, Any] | None, path: Path) -> None:
    """``data[keys...]["memoryd"] = entry``; None removes it when it starts ``memoryd mcp`` (ours)."""
    parents = [data]
    for key in keys:
        parents.append(child(parents[-1], key, path))
    table = parents[-1]
    if entry is not None:
        table[SERVER] = entry
    elif _is_ours(table.get(SERVER)):
        del table[SERVER]
    for parent, key in reversed(list(zip(parents[:-1], keys, strict=True))):
        _prune(parent, key)


def _is_ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    args = entry.get("args")
    return Path(str(entry.get("command", ""))).name == "memoryd" and isinstance(args, list) and args[:1] == ["mcp"]


def _prune(data: dict[str, Any], key: str) -> None:
    if key in data and data[key] in ({}, []):
        del data[key]


# -- Codex ------------------------------------------------------------------------------------


def codex_table(where: Where) -> str:
    """config/agents/codex.toml's table, with the absolute memoryd (and without its header comment)."""
    lines = [line for line in snippet("codex.toml").splitlines(keepends=True) if not line.startswith("# ~/")]
    text = "".join(lines).replace('command = "memoryd"', f"command = {json.dumps(where.exe)}", 1)
    if json.dumps(where.exe) not in text:  # pragma: no cover - guarded by a test on the shipped snippet
        raise SetupError("the shipped codex.toml has no 'command = \"memoryd\"' line")
    return text


def _codex(where: Where, install: bool) -> tuple[list[Change], list[str]]:
    config = where.home / ".codex" / "config.toml"
    old = read_text(config)
    table = codex_table(where) if install else None
    new: str | None = old  # not ours (or none): left alone
    if install or old is None or _is_ours(_codex_entry(config, old)):
        new = replace_toml_table(config, old, CODEX_TABLE, table)
    new, notes = codex_notify(config, new, where.exe, install)  # the capture: Codex's notify program
    table_change = Change(config, old, new, "the MCP server memoryd and the notify capture", mode=0o600)
    memo = where.home / ".codex" / "AGENTS.md"
    return [table_change, _block_edit(memo, snippet("AGENTS.md") if install else None,
                                      "the memoryd instructions")], notes


def _codex_entry(path: Path, text: str) -> object:
    servers = parse_toml(path, text).get("mcp_servers")
    return servers.get(SERVER) if isinstance(servers, dict) else None


# -- OpenClaw ---------------------------------------------------------------------------------


def openclaw_config(workspace: Path) -> str:
    """config/agents/openclaw.toml with the workspace's absolute path as the root."""
    text = snippet("openclaw.toml")
    return text.replace('roots = ["~/.openclaw/workspace"]', f"roots = [{json.dumps(str(workspace))}]", 1)


def _openclaw(where: Where, install: bool) -> tuple[list[Change], list[str]]:
    workspace = where.workspace or where.home / ".openclaw" / "workspace"
    registry = where.home / ".openclaw" / "openclaw.json"
    entry = {"command": where.exe, "args": ["mcp"]}
    changes = [
        _json_edit(registry, "the MCP server memoryd",
                   lambda d: _set_server(d, ["mcp", "servers"], entry if install else None, registry), json5=True),
        _block_edit(workspace / "AGENTS.md", snippet("AGENTS.md") if install else None, "the memoryd instructions"),
    ]
    hook_changes, notes = openclaw_changes(where.home, where.exe, install)  # the capture hook
    changes += hook_changes
    config = where.config
    if install and config is not None:
        old = read_text(config)
        if old is None:
            changes.append(Change(config, None, openclaw_config(workspace), "the memoryd config for the workspace",
                                  mode=0o600))  # 0600, as init writes it (settings/trust.py refuses g/o+w)
        elif not _indexes(config, old, workspace):
            notes.append(f"{config} exists and is left as it is: to index the workspace, set in its [watch] "
                         f"roots = [{json.dumps(str(workspace))}] and the include globs of "
                         "config/agents/openclaw.toml (docs/agents.md), then restart memoryd")
    elif not install and config is not None:
        notes.append(f"{config} (the memoryd config) is kept: it is memoryd's, not the agent's")
    return changes, notes


def _indexes(path: Path, text: str, workspace: Path) -> bool:
    """Whether the memoryd config at ``path`` already lists ``workspace`` as a root."""
    watch = parse_toml(path, text).get("watch")
    roots = watch.get("roots", []) if isinstance(watch, dict) else []
    return any(Path(str(r)).expanduser() == workspace for r in roots if isinstance(r, str))


# -- shared -----------------------------------------------------------------------------------


def _json_edit(path: Path, what: str, edit: Callable[[dict[str, Any]], None], json5: bool = False) -> Change:
    old = read_text(path)
    try:
        data = load_json_object(path, old)
    except SetupError as exc:
        if json5:
            raise SetupError(f"{exc}. OpenClaw also reads JSON5 (comments, trailing commas), which memoryd does "
                             "not rewrite: add mcp.servers.memoryd yourself (docs/agents.md)") from None
        raise
    before = json.dumps(data, sort_keys=True)
    edit(data)
    if json.dumps(data, sort_keys=True) == before:
        return Change(path, old, old, what)  # nothing to do: the file is left byte for byte
    if not data:  # only memoryd's entry was in it: the file goes, as it came
        return Change(path, old, None, what)
    return Change(path, old, dump_json_like(data, old), what, mode=0o600)


def _block_edit(path: Path, body: str | None, what: str) -> Change:
    old = read_text(path)
    return Change(path, old, replace_marked_block(old, BEGIN, END, marked_block(body, BEGIN, END) if body else None),
                  what)
