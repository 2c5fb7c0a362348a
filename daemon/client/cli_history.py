"""``memoryd history [PATH]``, ``memoryd undo ID``, ``memoryd purge ID``: see and revert what writes replaced,
removed or absorbed, and remove a record's text for good.

Clients of the running daemon, like ``memoryd audit`` (owner only; the socket
methods are in :mod:`memoryd.daemon.api.history`). ``memoryd.daemon.cli`` adds the parsers
with :func:`add_parsers` and dispatches through :data:`COMMANDS`.

Text from memory files is printed with control characters escaped, so an entry
cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from memoryd.daemon.client.cli_help import command, positive_int
from memoryd.daemon.client.cli_write import _call, _common, _print_json

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _safe(value: object, width: int = 0) -> str:
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value))
    return text if not width or len(text) <= width else text[: width - 1] + "…"


def add_parsers(sub: Any) -> None:
    """Add ``history`` and ``undo`` to the ``memoryd`` sub-command parsers."""
    p = command(sub, "history", "list replaced, removed and reinforced entries (newest first), with undo IDs",
                "memoryd history", "memoryd history MEMORY.md --limit 10")
    _common(p)
    p.add_argument("path", nargs="?", help="only this file, or the files under this folder (relative to the root)")
    p.add_argument("-n", "--limit", type=positive_int, default=50, help="number of records (default 50)")

    p = command(sub, "undo", "revert one history record: put a replaced or removed entry back",
                "memoryd undo h-3f2a9c0d1e4b5a67   # an ID from `memoryd history`")
    _common(p)
    p.add_argument("id", help="the record's ID, as printed by `memoryd history`")

    p = command(sub, "purge", "remove one history record's texts for good (a forgotten secret); no undo after",
                "memoryd purge h-3f2a9c0d1e4b5a67   # an ID from `memoryd history`")
    _common(p)
    p.add_argument("id", help="the record's ID, as printed by `memoryd history`")


def cmd_history(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.path:
        params["path"] = args.path
    result = _call(args, "history", params)
    if args.json:
        _print_json(result)
        return 0
    if not result.get("entries") and args.path:  # silence read as "nothing happened there", even for a typo
        if result.get("path_exists", True):
            print(f"no history for {_safe(args.path)}")
            return 0
        where = ", ".join(_safe(r) for r in result.get("roots", [])) or "the memory roots"
        print(f"memoryd history: no memory file or folder '{_safe(args.path)}' under {where}", file=sys.stderr)
        return 1
    cut = 200 if sys.stdout.isatty() else 0  # a pipe gets the whole entry (a script must not lose text)
    for e in result.get("entries", []):
        done = f"  (undone by {_safe(e['undone_by'])})" if e.get("undone_by") else ""
        print(f"{_safe(e.get('id', '?'))}  {_safe(e.get('time', '?'))}  {_safe(e.get('action', '?')):<9} "
              f"{_safe(e.get('path', '-'))}:{_safe(e.get('line', '?'))}{done}")
        if e.get("old") is not None:
            print(f"    old: {_safe(e['old'], cut)}")
        if e.get("new") is not None:
            print(f"    new: {_safe(e['new'], cut)}")
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    result = _call(args, "undo", {"id": args.id})
    if args.json:
        _print_json(result)
    else:
        print(f"restored: {_safe(result['path'])}:{result['line']} ({_safe(result.get('reason', ''))}; "
              f"recorded as {_safe(result.get('history_id', '?'))})")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    result = _call(args, "purge", {"id": args.id})
    if args.json:
        _print_json(result)
    else:
        entry = result.get("entry") or {}
        print(f"purged: {_safe(result.get('id', '?'))} ({_safe(entry.get('action', '?'))} of "
              f"{_safe(entry.get('path', '-'))}:{_safe(entry.get('line', '?'))}); its texts are gone from the history")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"history": cmd_history, "undo": cmd_undo,
                                                            "purge": cmd_purge}
