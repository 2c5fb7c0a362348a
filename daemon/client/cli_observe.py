"""``memoryd observe [FILE|-]``: hand a conversation to the daemon (docs/conversations.md).

FILE (``-`` or none: stdin) is a transcript in any format observe reads (Claude Code or Codex
JSONL, an OpenAI ``messages`` array, ``role: text`` lines). It is parsed here and sent as turns
with their ids, newest last, trimmed from the front to fit one request (the daemon has seen the
older turns already, from earlier calls). ``--hook HOST`` is what the installed agent hooks run:
the event comes from the host (stdin or the last argument), and the work goes on in a detached
child while the hook returns at once (:mod:`memoryd.daemon.client.observe_hook`).

Exit status: 0 done (or handed off), 1 the daemon refused or is not running, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command
from memoryd.daemon.exits import EXIT_ERROR, EXIT_USAGE

MAX_FILE_BYTES = 256 * 1024 * 1024
REQUEST_BUDGET = 800_000  # bytes of turns one request carries (server.max_request_bytes is 1 MiB by default)


def add_parsers(sub: Any) -> None:
    p = command(sub, "observe", "hand a conversation transcript to the daemon: captured, and extracted with [llm]",
                "memoryd observe ~/.claude/projects/x/4f1c.jsonl --session-id 4f1c --namespace agent:claude-code",
                "printf 'user: I prefer tea\\nassistant: noted\\n' | memoryd observe - --session-id s1",
                "memoryd observe --hook claude-code   # what the installed Stop hook runs (event on stdin)",
                note="Only turns the daemon has not seen for that session are kept; a re-sent transcript adds nothing.")
    p.add_argument("file", nargs="?", default="-", help="the transcript (default -: stdin); with --hook codex: the "
                   "event JSON Codex appends")
    p.add_argument("--session-id", help="the conversation's id (required without --hook)")
    p.add_argument("--namespace", help="where the session note goes: agent:ID (default with --hook: agent:HOST), "
                   "peer:ID, group:ID or default")
    p.add_argument("--format", default="auto", choices=("auto", "claude-code", "codex", "openai", "plain"))
    p.add_argument("--wait", action="store_true", help="with [llm]: extract before answering and print the result")
    p.add_argument("--final", action="store_true", help="the conversation ended (extraction is not throttled)")
    p.add_argument("--hook", choices=("claude-code", "codex", "openclaw"),
                   help="run as that host's hook: read its event, hand off in the background, return at once")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")


def turns_of(text: str, fmt: str) -> list[dict[str, str]]:
    """The transcript's turns with their ids, the newest that fit :data:`REQUEST_BUDGET`."""
    from memoryd.indexer.observe.transcript import parse

    turns = [{"role": t.role, "text": t.text, "id": t.id} for t in parse(text, fmt)]
    size, keep = 0, 0
    for t in reversed(turns):
        size += len(t["text"].encode("utf-8", "surrogatepass")) + 64
        if size > REQUEST_BUDGET and keep:
            break
        keep += 1
    return turns[len(turns) - keep:]


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read(MAX_FILE_BYTES)
    with open(path, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return data.decode("utf-8", "replace")


def _call(args: argparse.Namespace, params: dict[str, Any]) -> Any:
    from memoryd.daemon.client.cli_write import _socket
    from memoryd.daemon.client.rpc_client import Client
    from memoryd.indexer.paths import client_daemon_uid

    timeout = 180.0 if args.wait else 30.0
    with Client(_socket(args), timeout=timeout, expect_uid=client_daemon_uid(args.config, os.environ)) as client:
        return client.call("observe", params)


def cmd_observe(args: argparse.Namespace) -> int:
    if args.hook:
        return _hook(args)
    if not args.session_id:
        print("memoryd observe: --session-id is required (or --hook HOST)", file=sys.stderr)
        return EXIT_USAGE
    from memoryd.indexer.observe.transcript import TranscriptError

    try:
        turns = turns_of(_read(args.file), args.format)
    except (OSError, ValueError, TranscriptError) as exc:
        print(f"memoryd observe: {exc}", file=sys.stderr)
        return EXIT_ERROR
    params: dict[str, Any] = {"session_id": args.session_id, "turns": turns, "wait": args.wait, "final": args.final}
    if args.namespace:
        params["namespace"] = args.namespace
    out = _call(args, params)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        ext = out.get("extraction", {})
        print(f"{out['captured']} new turn(s) -> {out['note'] or '(no note yet)'}; {out['seen']} already seen; "
              f"extraction: {ext.get('state')}" + (f" ({ext['error']})" if ext.get("error") else ""))
    return 0


def _hook(args: argparse.Namespace) -> int:
    """The host's hook: parse its event here (cheap), then hand off in a detached child and return."""
    from memoryd.daemon.client.observe_hook import DEFAULT_NAMESPACE, HookEventError, detach, log_line, parse_event

    raw = args.file if args.hook == "codex" and args.file != "-" else sys.stdin.read(4 * 1024 * 1024)
    runtime = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    try:
        job = parse_event(args.hook, raw)
    except HookEventError as exc:
        log_line(runtime, "observe_hook.bad_event", host=args.hook, error=str(exc))
        return 0  # never the agent's problem
    if not detach():
        return 0
    code = 0
    try:
        turns = job.turns if job.turns is not None else turns_of(_read(str(job.path)), args.format)
        params: dict[str, Any] = {"session_id": job.session_id, "turns": turns, "final": job.final,
                                  "namespace": args.namespace or DEFAULT_NAMESPACE[args.hook]}
        out = _call(args, params)
        log_line(runtime, "observe_hook.sent", host=args.hook, captured=out.get("captured"), note=out.get("note"))
    except Exception as exc:  # the child has no one to tell but its log
        log_line(runtime, "observe_hook.failed", host=args.hook, error=f"{type(exc).__name__}: {exc}"[:500])
        code = 1
    finally:
        os._exit(code)


def hook_main(argv: list[str]) -> int:
    """``memoryd observe --hook HOST ...`` without the rest of the CLI: the agent waits for every import
    (memoryd.daemon.cli takes this path; the full parser accepts the same arguments)."""
    p = argparse.ArgumentParser(prog="memoryd observe")
    for name in ("--hook", "--namespace", "--session-id"):
        p.add_argument(name)
    p.add_argument("file", nargs="?", default="-")
    p.add_argument("--format", default="auto")
    p.add_argument("--config", type=Path)
    p.add_argument("--socket", type=Path)
    args, _ = p.parse_known_args(argv)
    args.wait = False
    return _hook(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"observe": cmd_observe}
