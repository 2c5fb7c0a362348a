"""``memoryd observe --hook HOST``: what an agent host's hook hands over, handed to the daemon without waiting.

A host runs its hook in the path of the conversation, so the hook must cost the agent nothing:
it reads the event (Claude Code: a JSON object on stdin; Codex ``notify``: a JSON argument),
forks a detached child that does the work (read the transcript, parse, send ``observe``), and
returns at once — the child's stdin, stdout and stderr are ``/dev/null``, so no host waits on a
pipe it holds. What the child hits (no daemon, a bad file) is written to ``observe-hook.log`` in
the runtime dir, never to the agent.

* **claude-code** (``Stop``, ``PreCompact``, ``SessionEnd``): ``{"session_id", "transcript_path",
  "hook_event_name", ...}``; ``SessionEnd`` is the session's ``final`` observe;
* **codex** (``notify``): ``{"type": "agent-turn-complete", "thread-id"?, "turn-id",
  "input-messages": [...], "last-assistant-message": "..."}``: the turn itself, no file;
* **openclaw** (the ``memoryd-observe`` hook's handler): ``{"sessionId", "sessionFile", "event"}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

HOOK_HOSTS = ("claude-code", "codex", "openclaw")
DEFAULT_NAMESPACE = {"claude-code": "agent:claude-code", "codex": "agent:codex", "openclaw": "agent:openclaw"}
MAX_EVENT_BYTES = 4 * 1024 * 1024


class HookEventError(ValueError):
    """The event is not what the host sends (the message says what is missing)."""


@dataclass(frozen=True)
class HookJob:
    """What the detached child sends: a transcript file, or turns given in the event."""

    session_id: str
    path: str | None
    turns: list[dict[str, str]] | None
    final: bool


def parse_event(host: str, raw: str) -> HookJob:
    """The job of one hook event of ``host``; :class:`HookEventError` when it is not one."""
    try:
        event = json.loads(raw)
    except ValueError:
        raise HookEventError(f"{host} hook: the event is not JSON") from None
    if not isinstance(event, dict):
        raise HookEventError(f"{host} hook: the event is not a JSON object")
    if host == "claude-code":
        sid, path = event.get("session_id"), event.get("transcript_path")
        if not isinstance(sid, str) or not isinstance(path, str):
            raise HookEventError("claude-code hook: the event has no session_id / transcript_path")
        return HookJob(sid, path, None, event.get("hook_event_name") == "SessionEnd")
    if host == "codex":
        if event.get("type") != "agent-turn-complete":
            raise HookEventError(f"codex notify: ignoring event type {str(event.get('type'))[:40]!r}")
        sid = event.get("thread-id") or event.get("thread_id") or event.get("session-id") or "codex"
        inputs = event.get("input-messages") or []
        turns = [{"role": "user", "text": str(m)} for m in inputs if isinstance(m, str)]
        reply = event.get("last-assistant-message")
        if isinstance(reply, str):
            turns.append({"role": "assistant", "text": reply})
        return HookJob(str(sid), None, turns, False)
    if host == "openclaw":
        sid, path = event.get("sessionId"), event.get("sessionFile")
        if not isinstance(sid, str) or not isinstance(path, str):
            raise HookEventError("openclaw hook: the event has no sessionId / sessionFile")
        return HookJob(sid, path, None, str(event.get("event", "")) in ("command:new", "command:reset",
                                                                        "command:stop"))
    raise HookEventError(f"unknown hook host {host!r}; one of {', '.join(HOOK_HOSTS)}")


def detach() -> bool:
    """Fork a detached grandchild; True in it (do the work, then ``os._exit``), False in the caller (return)."""
    pid = os.fork()
    if pid > 0:
        os.waitpid(pid, 0)  # the first child exits at once: no zombie left to the host
        return False
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return True


def log_line(runtime: str, what: str, **fields: Any) -> None:
    """One JSON line in the hook's log (the agent never sees it): the child has no terminal."""
    path = os.path.join(runtime, "observe-hook.log")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": what, **fields}, ensure_ascii=False)[:4000] + "\n")
