"""The conversation-capture half of ``memoryd agents install`` (docs/conversations.md): each host's hook
hands its conversation to ``memoryd observe`` and returns at once.

- **claude-code**: ``Stop`` (each finished turn), ``PreCompact`` (before a compaction drops turns from
  the context) and ``SessionEnd`` hooks in the same ``settings.json`` as the context hook, each
  running ``/abs/memoryd observe --hook claude-code`` (the event, with the transcript's path, on stdin);
- **codex**: the top-level ``notify`` program of ``~/.codex/config.toml``
  (``["/abs/memoryd", "observe", "--hook", "codex"]``; Codex appends the turn as a JSON argument). A
  ``notify`` the user set to another program is left alone: Codex runs one, so the note says how to chain;
- **openclaw**: a managed hook ``~/.openclaw/hooks/memoryd-observe/`` (``HOOK.md`` + ``handler.ts``) on
  ``command:new`` / ``command:reset`` / ``command:stop`` / ``session:compact:before``, passing the session
  file to ``memoryd observe --hook openclaw``; OpenClaw loads it once enabled (``openclaw hooks enable``).

Ours is recognised by the command (``observe --hook HOST`` run by a ``memoryd``), so uninstall removes
exactly these and never the user's own hooks.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from memoryd.daemon.client.setup_files import Change, child, parse_toml, place_command_hook, read_text

CLAUDE_EVENTS = ("Stop", "PreCompact", "SessionEnd")
CAPTURE_TIMEOUT_S = 10  # the hook returns in well under a second; this only bounds a wedged start
NOTIFY_COMMENT = "# memoryd: conversation capture ('memoryd agents uninstall codex' removes it)"
OPENCLAW_HOOK = "memoryd-observe"
OPENCLAW_EVENTS = ("command:new", "command:reset", "command:stop", "session:compact:before")


def capture_argv(exe: str, host: str) -> list[str]:
    return [exe, "observe", "--hook", host]


def is_capture(command: object, host: str) -> bool:
    """Whether a hook command is memoryd's capture hook for ``host``."""
    try:
        words = shlex.split(str(command))
    except ValueError:
        return False
    return len(words) >= 4 and Path(words[0]).name == "memoryd" and words[1:4] == ["observe", "--hook", host]


# -- Claude Code ------------------------------------------------------------------------------


def set_claude_capture(data: dict[str, Any], exe: str | None, path: Path) -> None:
    """Put the capture hook on each of :data:`CLAUDE_EVENTS` (``exe`` None: remove ours), others kept."""
    hooks = child(data, "hooks", path)
    ours = {"type": "command", "command": shlex.join(capture_argv(exe, "claude-code")),
            "timeout": CAPTURE_TIMEOUT_S} if exe else None
    for event in CLAUDE_EVENTS:
        place_command_hook(hooks, event, ours, lambda command: is_capture(command, "claude-code"), path)
    if data.get("hooks") == {}:
        del data["hooks"]


# -- Codex ------------------------------------------------------------------------------------


def codex_notify(path: Path, text: str | None, exe: str, install: bool) -> tuple[str | None, list[str]]:
    """``text`` (config.toml) with our top-level ``notify`` added or removed; notes for the report."""
    current = parse_toml(path, text).get("notify") if text is not None else None
    ours = isinstance(current, list) and is_capture(shlex.join(str(w) for w in current), "codex")
    lines = (text or "").splitlines(keepends=True)
    if current is not None and not ours:
        if install:
            return text, [f"{path} already has notify = {json.dumps(current)[:200]}; Codex runs one notify "
                          f"program, so memoryd's capture is not added: have yours also run "
                          f"{shlex.join(capture_argv(exe, 'codex'))} with the same JSON argument"]
        return text, []
    kept = [ln for ln in lines if ln.rstrip("\r\n") != NOTIFY_COMMENT and not (ours and _is_notify_line(ln))]
    if not install:
        new = "".join(kept)
        return (new if new.strip() else None) if text is not None else None, []
    add = [NOTIFY_COMMENT + "\n", f"notify = {json.dumps(capture_argv(exe, 'codex'))}\n"]
    at = next((i for i, ln in enumerate(kept) if ln.lstrip().startswith("[")), len(kept))  # top-level: before a table
    if at == len(kept) and kept and not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    return "".join(kept[:at] + add + kept[at:]), []


def _is_notify_line(line: str) -> bool:
    return line.lstrip().startswith("notify") and line.split("=", 1)[0].strip() == "notify"


# -- OpenClaw ---------------------------------------------------------------------------------

HOOK_MD = """---
name: memoryd-observe
description: "Hand each session's conversation to memoryd (captured as a session note; extracted with [llm])"
metadata: {"openclaw": {"emoji": "🧠", "events": %(events)s, "requires": {"bins": ["memoryd"]}}}
---

# memoryd-observe

Written by `memoryd agents install openclaw`; `memoryd agents uninstall openclaw` removes it.
On /new, /reset, /stop and before a compaction, passes the session file to
`memoryd observe --hook openclaw`, which returns at once and captures the new turns in the
background (docs/conversations.md in memoryd).
"""

HANDLER_TS = """// Written by `memoryd agents install openclaw` (memoryd-observe): never blocks the agent.
import { spawn } from "node:child_process";

const MEMORYD = %(exe)s;

const handler = async (event: any): Promise<void> => {
  const ctx = event?.context ?? {};
  const sessionFile = ctx.sessionFile ?? ctx.sessionEntry?.sessionFile;
  const sessionId = ctx.sessionId ?? ctx.sessionEntry?.sessionId ?? event?.sessionKey;
  if (typeof sessionFile !== "string" || typeof sessionId !== "string") return;
  const payload = JSON.stringify({ sessionId, sessionFile, event: `${event?.type}:${event?.action}` });
  try {
    const child = spawn(MEMORYD, ["observe", "--hook", "openclaw"], {
      detached: true, stdio: ["pipe", "ignore", "ignore"],
    });
    child.on("error", () => {});
    child.stdin?.end(payload);
    child.unref();
  } catch {
    // memoryd not installed or not runnable: the conversation goes on without it
  }
};

export default handler;
"""


def openclaw_hook_files(exe: str) -> dict[str, str]:
    return {"HOOK.md": HOOK_MD % {"events": json.dumps(list(OPENCLAW_EVENTS))},
            "handler.ts": HANDLER_TS % {"exe": json.dumps(exe)}}


def openclaw_changes(home: Path, exe: str, install: bool) -> tuple[list[Change], list[str]]:
    """The managed hook's two files (removed on uninstall only while they are still ours)."""
    folder = home / ".openclaw" / "hooks" / OPENCLAW_HOOK
    changes, notes = [], []
    for name, text in openclaw_hook_files(exe).items():
        old = read_text(folder / name)
        if install:
            changes.append(Change(folder / name, old, text, f"the OpenClaw capture hook ({name})"))
        else:
            mine = old is not None and old.startswith(("---\nname: memoryd-observe", "// Written by `memoryd"))
            changes.append(Change(folder / name, old, None if mine else old, f"the OpenClaw capture hook ({name})"))
    if install:
        notes.append(f"enable the capture hook in OpenClaw: openclaw hooks enable {OPENCLAW_HOOK} "
                     "(it runs on /new, /reset, /stop and before a compaction; OpenClaw has no per-turn hook "
                     "with the session file, so turns since the last of these wait for the next one)")
    return changes, notes
