"""The memory-management commands of the ``memoryd`` CLI: ``list``, ``export``, ``import``, ``clear``, ``stats``,
``update-section`` and ``promote``.

Clients of the running daemon, like ``remember`` (the socket methods are in
:mod:`memoryd.daemon.api.manage`); they import nothing heavy. ``memoryd.daemon.cli``
adds the parsers with :func:`add_parsers` and dispatches through :data:`COMMANDS`.
What they print passes through the CLI's terminal filter (control characters escaped);
``export -o FILE`` writes the daemon's text to the file unchanged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command, positive_int
from memoryd.daemon.client.cli_write import TYPES, _call, _common, _print_json, _socket
from memoryd.daemon.exits import EXIT_REJECTED, EXIT_USAGE


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namespace", help="default, agent:ID, peer:ID or group:ID (default: all you may read)")
    p.add_argument("--type", choices=TYPES, help="only entries of this type")
    p.add_argument("--since", metavar="YYYY-MM-DD", help="only entries dated on or after this day")
    p.add_argument("--until", metavar="YYYY-MM-DD", help="only entries dated on or before this day")


def add_parsers(sub: Any) -> None:
    """Add the management commands to the ``memoryd`` sub-command parsers."""
    p = command(sub, "list", "list memory entries with their path, lines, type and dates",
                "memoryd list --namespace peer:alice", "memoryd list --type decision --since 2026-01-01 --limit 20")
    _common(p)
    _filters(p)
    p.add_argument("--limit", type=positive_int, default=100, help="entries per page (default 100, at most 1000)")
    p.add_argument("--cursor", help="continue after this entry (the 'next:' line of the previous page)")

    p = command(sub, "export", "export memory entries as JSONL (with metadata) or the files as one Markdown bundle",
                "memoryd export --namespace default -o memories.jsonl",
                "memoryd export --format markdown --namespace peer:alice -o alice.md")
    _common(p)
    _filters(p)
    p.add_argument("--format", choices=("jsonl", "markdown"), default="jsonl", help="jsonl (default) or markdown")
    p.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")

    p = command(sub, "import", "restore exported entries to their files; add other lines through gate, filter, dedup",
                "memoryd import --dry-run memories.jsonl", "memoryd import --namespace agent:coder memories.jsonl")
    _common(p)
    p.add_argument("file", help="a JSONL file (an export, or one {\"text\", \"type\"?, \"namespace\"?} per line), "
                   "or - for stdin; any size: sent in parts, and a re-run adds nothing twice")
    p.add_argument("--namespace", help="for lines that name none (default: the default namespace)")
    p.add_argument("--dry-run", action="store_true", help="write nothing; say what would happen to each line")

    p = command(sub, "clear", "remove every entry of one namespace (each can be undone from `memoryd history`)",
                "memoryd clear peer:alice --yes   # then: memoryd undo ID to put them all back")
    _common(p)
    p.add_argument("namespace", help="default, agent:ID, peer:ID or group:ID")
    p.add_argument("--yes", action="store_true", help="really remove them (required)")

    p = command(sub, "stats", "count the files, entries and bytes of each namespace",
                "memoryd stats", "memoryd stats --namespace group:dev --json")
    _common(p)
    p.add_argument("--namespace", help="only this namespace")

    p = command(sub, "update-section", "replace the body of one section (only sections listed in write.sections)",
                "memoryd update-section memory-bank/activeContext.md 'Current Focus' 'Ship the export command.'",
                "memoryd update-section MEMORY.md 'Next Steps' --file next.md")
    _common(p)
    p.add_argument("path", help="the file, relative to the first root")
    p.add_argument("section", help="the section's heading title")
    p.add_argument("text", nargs="*", help="the new body (or --file, or - for stdin)")
    p.add_argument("--file", type=Path, help="read the new body from this file")

    p = command(sub, "promote", "copy an entry of a peer or group into an owner namespace, with a back-reference",
                "memoryd promote peers/alice/MEMORY.md:3", "memoryd promote groups/dev/MEMORY.md:7 --to agent:coder")
    _common(p)
    p.add_argument("target", help="PATH:LINE of the entry, as `memoryd list` prints it")
    p.add_argument("--to", default="default", help="default (the default) or agent:ID")
    p.add_argument("--type", choices=TYPES, help="skip the router's keyword rules")
    p.add_argument("--text", help="only if the entry on that line has this text (as `memoryd list` prints it)")


def _with(params: dict[str, Any], args: argparse.Namespace, *keys: str) -> dict[str, Any]:
    return {**params, **{k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}}


def cmd_list(args: argparse.Namespace) -> int:
    params = _with({"limit": args.limit}, args, "namespace", "type", "since", "until", "cursor")
    result = _call(args, "list", params)
    if args.json:
        _print_json(result)
        return 0
    for e in result.get("entries", []):
        span = f"{e['start_line']}" if e["start_line"] == e["end_line"] else f"{e['start_line']}-{e['end_line']}"
        extra = [x for x in (e.get("type"), e.get("created") or (e.get("updated") or "")[:10]) if x]
        if e.get("reinforcements"):
            extra.append(f"reinforced {e['reinforcements']}x")
        print(f"{e['path']}:{span}  [{', '.join(extra)}]  {e['text']}")
    if result.get("next_cursor"):
        print(f"next: --cursor {result['next_cursor']}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    result = _call(args, "export", _with({"format": args.format}, args, "namespace", "type", "since", "until"))
    if args.json:
        _print_json(result)
    elif args.output is not None:
        args.output.write_text(result["text"], encoding="utf-8")
        print(f"exported {result['count']} {'entries' if args.format == 'jsonl' else 'files'} to {args.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(result["text"])
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Stream the file in requests under the daemon's caps (:mod:`memoryd.daemon.client.import_stream`)."""
    from memoryd.daemon.client.import_stream import run

    summary = run(args, _socket(args))
    if not args.json:
        text = ", ".join(f"{n} {d}" for d, n in sorted(summary.items()))
        print(("dry run: " if args.dry_run else "imported: ") + (text or "nothing"))
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    if not args.yes:
        print(f"memoryd: clear removes every entry of {args.namespace}; add --yes to do it", file=sys.stderr)
        return EXIT_USAGE
    result = _call(args, "clear", {"namespace": args.namespace})
    if args.json:
        _print_json(result)
    else:
        undo = f"; undo with: memoryd undo {result['history_id']}" if result.get("history_id") else ""
        print(f"cleared {result['namespace']}: {result['removed']} entries from {result['files']} files{undo}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    result = _call(args, "stats", _with({}, args, "namespace"))
    if args.json:
        _print_json(result)
        return 0
    rows = [*result.get("namespaces", {}).items(), ("total", result.get("total", {}))]
    for name, row in rows:
        print(f"{name:<24} {row.get('files', 0):>6} files {row.get('entries', 0):>7} entries "
              f"{row.get('bytes', 0):>10} bytes")
    return 0


def cmd_update_section(args: argparse.Namespace) -> int:
    if args.file is not None:
        body = args.file.read_text(encoding="utf-8")
    elif args.text == ["-"]:
        body = sys.stdin.read()
    elif args.text:
        body = " ".join(args.text)
    else:
        print("memoryd: update-section needs the new body: TEXT, --file FILE or - (stdin)", file=sys.stderr)
        return EXIT_USAGE
    result = _call(args, "update_section", {"path": args.path, "section": args.section, "content": body})
    if args.json:
        _print_json(result)
    elif result.get("decision") == "rejected":
        print(f"rejected ({result.get('rule')}): {result.get('reason')}")
    else:
        undo = f"; undo with: memoryd undo {result['history_id']}" if result.get("history_id") else ""
        print(f"{result['decision']}: {result['path']}:{result['line']} ({result.get('reason', '')}){undo}")
    return EXIT_REJECTED if result.get("decision") == "rejected" else 0


def cmd_promote(args: argparse.Namespace) -> int:
    path, sep, line = args.target.rpartition(":")
    if not sep or not path or not line.isdigit():
        print(f"memoryd: promote needs PATH:LINE, got {args.target!r}", file=sys.stderr)
        return EXIT_USAGE
    result = _call(args, "promote", _with({"path": path, "line": int(line), "to": args.to}, args, "type", "text"))
    if args.json:
        _print_json(result)
    elif result.get("decision") == "rejected":
        print(f"rejected ({result.get('rule')}): {result.get('reason')}")
    else:
        from memoryd.daemon.client.render import render_written

        print("\n".join(render_written(result)))  # a promote can reinforce or replace too: say what it was
    return EXIT_REJECTED if result.get("decision") == "rejected" else 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": cmd_list, "export": cmd_export, "import": cmd_import, "clear": cmd_clear, "stats": cmd_stats,
    "update-section": cmd_update_section, "promote": cmd_promote,
}
