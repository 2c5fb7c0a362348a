"""``memoryd bank detect|plan|apply PATH [--json]``: Memory Bank maintenance (docs/memory-bank.md), in-process;
``memoryd bank propose|reply`` (proposals, through the daemon) live in :mod:`.cli_bank_loop`.

PATH is the project folder (the bank is ``PATH/memory-bank``) or the
``memory-bank`` folder itself. No daemon is needed; a running daemon sees the
changed files through its watcher and re-indexes them. ``plan`` changes
nothing; ``apply`` computes the same plan and carries it out, printing the
execution summary docs/memory-bank.md describes. Exit status: 0 done (or nothing to do), 1 refused
or failed (the message says why; with ``--json`` the object has ``error``).
The heavy part (:mod:`memoryd.indexer.bank`) is imported only when a bank command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command
from memoryd.daemon.exits import EXIT_ERROR


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bank`` and its three actions to the top-level ``memoryd`` sub-command parsers."""
    p = command(subparsers, "bank", "detect, plan and apply Memory Bank maintenance (init/upgrade/migrate/refresh)",
                "memoryd bank detect ~/code/myproject", "memoryd bank plan ~/code/myproject",
                "memoryd bank apply ~/code/myproject/memory-bank",
                note="detect, plan and apply work in-process on the folder named, so they need no daemon and "
                     "take no --config or --socket; propose and reply (write proposals, docs/agents.md) ask the "
                     "daemon.")
    actions = p.add_subparsers(dest="bank_action", metavar="ACTION", required=True)
    for name, help_text in (("detect", "say which flow the folder needs, and why"),
                            ("plan", "list the operations apply would carry out; changes nothing"),
                            ("apply", "carry out the plan and print a summary")):
        q = command(actions, name, help_text, f"memoryd bank {name} ~/code/myproject",
                    f"memoryd bank {name} --json ~/code/myproject")
        q.add_argument("path", type=Path, metavar="PATH", help="project folder, or its memory-bank folder")
        q.add_argument("--json", action="store_true", help="print a JSON object")
    from memoryd.daemon.client import cli_bank_loop  # propose / reply: through the daemon

    cli_bank_loop.add_actions(actions)


def _emit(args: argparse.Namespace, text: str, obj: dict[str, Any]) -> None:
    print(json.dumps(obj, ensure_ascii=False) if args.json else text)


def cmd_bank(args: argparse.Namespace) -> int:
    from memoryd.daemon.logs import configure_logging
    from memoryd.indexer.errors import MemorydError

    configure_logging("warning", "auto")  # stdout is for the report
    try:
        return _run(args)
    except MemorydError as exc:
        if args.json:
            print(json.dumps({"error": str(exc), "status": "refused"}, ensure_ascii=False))
        print(f"memoryd bank {args.bank_action}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _run(args: argparse.Namespace) -> int:
    if args.bank_action in ("propose", "reply"):
        from memoryd.daemon.client import cli_bank_loop

        return cli_bank_loop.run(args)
    from memoryd.indexer import bank

    if args.bank_action == "detect":
        det = bank.detect(args.path)
        _emit(args, bank.render_detection(det), det.to_json())
        return 0
    plan = bank.make_plan(args.path)
    if args.bank_action == "plan":
        _emit(args, bank.render_plan(plan), plan.to_json())
        return 0
    try:
        done = bank.apply_plan(plan)
    except bank.BankApplyError as exc:
        _emit(args, bank.render_summary(plan, exc.done, str(exc)), bank.summary_json(plan, exc.done, str(exc)))
        return EXIT_ERROR
    _emit(args, bank.render_summary(plan, done), bank.summary_json(plan, done))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bank": cmd_bank}
