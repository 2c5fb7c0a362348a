"""The write commands of the ``memoryd`` CLI: ``remember``, ``forget`` and ``audit``.

Clients of the running daemon, like ``search``: they import nothing heavy. ``memoryd.daemon.cli`` adds the parsers
with :func:`add_parsers` and dispatches through :data:`COMMANDS`.

Exit codes: 0 written (or listed), 1 rejected by the quality gate or privacy
filter, or an error reported by the daemon (message on stderr, by ``memoryd.daemon.cli``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command, positive_int
from memoryd.daemon.exits import EXIT_REJECTED, EXIT_USAGE
from memoryd.indexer.paths import client_daemon_uid, client_socket_path

# memoryd.indexer.write.router.TYPES, spelled out: compiling the router's regexes costs ~10 ms
# that every `memoryd reindex` (editor on-save hook) would pay. A test keeps the two equal.
TYPES = ("instruction", "decision", "pattern", "preference", "entity", "journal", "requirement", "focus", "design")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")


def add_parsers(sub: Any) -> None:
    """Add ``remember``, ``forget`` and ``audit`` to the ``memoryd`` sub-command parsers."""
    p = command(sub, "remember", "write a memory (quality gate, privacy filter, router, dedup)",
                "memoryd remember 'We chose PostgreSQL for the ledger: it needs transactions.'",
                "memoryd remember --type preference 'Prefers tabs over spaces in Go code.'")
    _common(p)
    p.add_argument("text", nargs="+", help="the memory, one fact")
    p.add_argument("--type", choices=TYPES, help="skip the router's keyword rules")
    p.add_argument("--namespace", help="default (the root), agent:ID, peer:ID or group:ID")
    p.add_argument("--explain", action="store_true",
                   help="also say why: the entry compared, its cosine, the subject, the slot, the words that differ")

    p = command(sub, "forget", "remove one memory entry: PATH:LINE (path relative to the first root)",
                "memoryd forget MEMORY.md:12", "memoryd forget MEMORY.md:12 --text 'Uses Redis for sessions.'")
    _common(p)
    p.add_argument("target", help="PATH:LINE, as printed by `memoryd remember`")
    p.add_argument("--text", help="only if the entry on that line has this text")

    p = command(sub, "audit", "show the audit log of writes (or of reads, --reads)", "memoryd audit --tail 5",
                "memoryd audit --reads -n 50   # who searched, read and listed what (never the query)")
    _common(p)
    p.add_argument("-n", "--tail", type=positive_int, default=20, help="number of records (default 20)")
    p.add_argument("--reads", action="store_true", help="the read audit: search, context, get, list, export, files")


def _socket(args: argparse.Namespace) -> Path:
    """The daemon's socket, found without loading the full config (as ``memoryd.daemon.cli`` does)."""
    if args.socket:
        return Path(os.path.abspath(os.path.expanduser(args.socket)))
    return client_socket_path(args.config, os.environ)


def _call(args: argparse.Namespace, method: str, params: dict[str, Any]) -> Any:
    from memoryd.daemon.client.rpc_client import Client

    with Client(_socket(args), expect_uid=client_daemon_uid(args.config, os.environ)) as client:
        return client.call(method, params)


def _print_json(result: Any) -> None:
    print(json.dumps(result, ensure_ascii=False))


def cmd_remember(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"content": " ".join(args.text)}
    if args.type:
        params["type"] = args.type
    if args.namespace:
        params["namespace"] = args.namespace
    if args.explain:
        params["explain"] = True
    result = _call(args, "remember", params)
    if args.json:
        _print_json(result)
    elif result.get("decision") == "rejected":
        print(f"rejected ({result.get('rule')}): {result.get('reason')}")
    else:
        from memoryd.daemon.client.render import render_written

        print("\n".join(render_written(result)))
        if result.get("related"):  # appended next to an entry it may update or restate: say which
            r = result["related"]
            print(f"  {r.get('flag', 'related')}: {r.get('path')}:{r.get('line')}")
        for also in result.get("also") or ():  # a Memory Bank decision is written in two places
            print(f"  also: {also.get('path')}:{also.get('line')}")
        if result.get("indexed") is False:  # written, but not searchable yet: say why
            print(f"  not indexed yet: {result.get('index_note', '')}")
        if result.get("explain"):
            _print_explain(result["explain"])
    return EXIT_REJECTED if result.get("decision") == "rejected" else 0


def _print_explain(ex: dict[str, Any], indent: str = "  ") -> None:
    """``remember --explain``: the entry compared and what the same-slot check read in the two texts."""
    c = ex.get("candidate")
    if not c:
        print(f"{indent}why: {ex.get('reason', '')} (nothing similar in scope)")
        return
    print(f"{indent}compared with {c['path']}:{c['line']} (cosine {c['cosine']}, {ex.get('kind')}, "
          f"{'in the route' if c.get('in_route') else 'elsewhere in scope'}): {c['text']}")
    sd = ex.get("slots") or {}
    signals = ", ".join(ex.get("signals") or ()) or "none"
    print(f"{indent}signals: {signals}; shared words {ex.get('shared_words')}")
    print(f"{indent}subject: {sd.get('subject') or '-'}; slot: {sd.get('slot') or '-'}; "
          f"differs: {'; '.join(sd.get('differs') or ()) or 'nothing'}")
    print(f"{indent}{sd.get('verdict', '')}: {sd.get('why', '')}")
    if ex.get("elsewhere"):
        _print_explain(ex["elsewhere"], indent + "  ")


def cmd_forget(args: argparse.Namespace) -> int:
    path, sep, line = args.target.rpartition(":")
    if not sep or not path or not line.isdigit():
        print(f"memoryd: forget needs PATH:LINE, got {args.target!r}", file=sys.stderr)
        return EXIT_USAGE
    params: dict[str, Any] = {"path": path, "line": int(line)}
    if args.text:
        params["text"] = args.text
    result = _call(args, "forget", params)
    if args.json:
        _print_json(result)
    else:
        print(f"removed: {result['path']}:{result['line']}: {result.get('previous', '')}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    result = _call(args, "audit", {"tail": args.tail, **({"log": "reads"} if args.reads else {})})
    if args.json:
        _print_json(result)
        return 0
    for e in result.get("entries", []):
        session = e.get("session", {})
        who = session.get("kind", "?") + (f":{session.get('peer') or session.get('group')}"
                                          if session.get("peer") or session.get("group") else "")
        where = f"{e.get('path') or e.get('namespace') or '-'}" + (f":{e['line']}" if e.get("line") else "")
        size = f"{e['hits']} hits" if "hits" in e else f"{e.get('bytes', '-')}B"
        print(f"{e.get('time', '?')}  uid={e.get('uid', '?')} {who:<16} {e.get('action', '?'):<8} "
              f"{e.get('decision', '?'):<10} {where}  {size}  {e.get('reason', '')}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "remember": cmd_remember,
    "forget": cmd_forget,
    "audit": cmd_audit,
}
