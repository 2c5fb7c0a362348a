"""``memoryd bank propose`` and ``memoryd bank reply``: Memory Bank proposals through the daemon (seed 002).

``propose [TRANSCRIPT]`` prints the 💾 proposal for a transcript (a file, or ``-``/nothing for stdin:
Claude Code's JSONL, an OpenAI ``messages`` array or ``role: text`` lines), or nothing when the turn
held nothing worth writing. ``reply --transcript PATH -- PROMPT`` is what the context hook runs: when
the transcript's last assistant turn held a proposal and PROMPT confirms it, the daemon writes it
(``remember``, as the session); the line printed tells the agent what happened, so it can say so.
Both are daemon methods (``bank_propose``, ``bank_reply``, docs/memory-api.md); exit 0 unless the
daemon cannot be reached or refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command

MAX_TRANSCRIPT_BYTES = 4_000_000  # the tail of a long session: only its last turns matter


def add_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``propose`` and ``reply`` to ``memoryd bank``'s actions."""
    p = command(actions, "propose", "print the 💾 Memory Bank proposal for a transcript (the daemon's bank_propose)",
                "memoryd bank propose ~/.claude/projects/x/session.jsonl", "memoryd bank propose - < chat.txt")
    _common(p)
    p.add_argument("transcript", nargs="?", default="-", help="transcript file, or - for stdin (default)")
    p.add_argument("--namespace", help="default (the root), agent:ID, peer:ID or group:ID")
    p = command(actions, "reply", "apply or skip the last proposal by the user's answer (the context hook runs it)",
                "memoryd bank reply --transcript session.jsonl -- 好")
    _common(p)
    p.add_argument("--transcript", required=True, type=Path, help="the transcript whose last assistant turn "
                   "may hold a proposal")
    p.add_argument("prompt", nargs="+", help="the user's message")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")


def run(args: argparse.Namespace) -> int:
    """``propose`` or ``reply``; raises ``MemorydError`` (the caller prints it) when the daemon refuses."""
    if args.bank_action == "propose":
        params: dict[str, Any] = {"transcript": _read(args.transcript)}
        if args.namespace:
            params["namespace"] = args.namespace
        out = _call(args, "bank_propose", params)
        text = "" if out.get("proposal") is None else str(out["proposal"]["text"])
    else:
        out = _call(args, "bank_reply", {"transcript": _read(str(args.transcript)), "prompt": " ".join(args.prompt)})
        text = reply_line(out)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    elif text:
        print(text)
    return 0


def reply_main(argv: list[str]) -> int:
    """``memoryd bank reply ...`` without the rest of the CLI (memoryd.daemon.cli takes this path): the
    context hook runs it before the prompt goes on, so every import is the user's wait. Same arguments
    and output as the full parser's; a daemon that cannot be reached or refuses: the message, exit 1."""
    from memoryd.indexer.errors import MemorydError

    p = argparse.ArgumentParser(prog="memoryd bank reply")
    _common(p)
    p.add_argument("--transcript", required=True, type=Path)
    p.add_argument("prompt", nargs="+")
    args = p.parse_args(argv)
    args.bank_action = "reply"
    try:
        return run(args)
    except MemorydError as exc:
        print(f"memoryd bank reply: {exc}", file=sys.stderr)
        return 1


def reply_line(out: dict[str, Any]) -> str:
    """What the agent is told after the user's answer ("" when there was nothing to answer)."""
    answer, target = out.get("answer"), (out.get("proposal") or {}).get("target", "")
    if answer == "confirm":
        done = ", ".join(f"{w['path']}:{w['line']} ({w['decision']})" for w in out.get("written", []))
        skipped = "; ".join(f"{r['point'][:60]!r}: {r['reason']}" for r in out.get("refused", []))
        line = f"memoryd: the Memory Bank proposal was confirmed and written: {done or 'nothing new'}."
        return line + (f" Not written: {skipped}." if skipped else "")
    if answer == "reject":
        return f"memoryd: the Memory Bank proposal for {target} was declined; nothing was written."
    return ""


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()[-MAX_TRANSCRIPT_BYTES:]
    path = Path(os.path.expanduser(source))
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - MAX_TRANSCRIPT_BYTES))
        return f.read().decode("utf-8", "replace")


def _call(args: argparse.Namespace, method: str, params: dict[str, Any]) -> Any:
    from memoryd.daemon.client.cli_write import _call as call

    return call(args, method, params)
