#!/usr/bin/env python3
"""Claude Code ``UserPromptSubmit`` hook: attach memoryd's context block for the prompt.

Claude Code runs it before each prompt with the event as JSON on stdin
(``{"prompt": ..., "session_id": ..., "cwd": ...}``); what it prints on stdout
(exit 0) is added to the prompt's context. It asks the running daemon for
``memoryd context`` (which prints nothing relevant as an empty block) and never
blocks a prompt: a stopped daemon, a timeout or bad input prints nothing.

Options: ``--memoryd PATH`` (the memoryd command, default ``memoryd`` on PATH),
``--max-tokens N`` (the budget, default 800), ``--socket PATH`` (a daemon on
another socket). Standard library only, so any python3 can run it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MAX_QUERY_CHARS = 2000  # a pasted log is not a question: its head is enough to find memories
TIMEOUT_S = 10.0
MIN_PROMPT_CHARS = 3


def context_block(prompt: str, args: argparse.Namespace) -> str:
    """The Markdown block memoryd returns for ``prompt`` ("" when nothing relevant or no daemon)."""
    # --user-prompt: a person has answered, so every agent's MCP write turn ends (its allowance comes back)
    cmd = [args.memoryd, "context", "--json", "--user-prompt", "--max-tokens", str(args.max_tokens)]
    if args.socket:
        cmd += ["--socket", args.socket]
    try:
        done = subprocess.run([*cmd, "--", prompt[:MAX_QUERY_CHARS]], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode != 0:
        return ""
    try:
        text = json.loads(done.stdout).get("text", "")
    except (ValueError, AttributeError):
        return ""
    return text if isinstance(text, str) else ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Print memoryd's context block for a Claude Code prompt event.")
    p.add_argument("--memoryd", default="memoryd")
    p.add_argument("--max-tokens", type=int, default=800)
    p.add_argument("--socket", default=None)
    args = p.parse_args(argv)
    try:
        event = json.load(sys.stdin)
    except ValueError:
        return 0
    prompt = event.get("prompt") if isinstance(event, dict) else None
    if not isinstance(prompt, str) or len(prompt.strip()) < MIN_PROMPT_CHARS:
        return 0
    block = context_block(prompt.strip(), args)
    if block.strip():
        sys.stdout.write(block if block.endswith("\n") else block + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
