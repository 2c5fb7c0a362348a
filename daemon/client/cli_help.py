"""One way to add a ``memoryd`` sub-command, so that every ``--help`` page reads the same.

Each page opens with what the command does (the same line ``memoryd --help`` lists) and ends
with at least one example to copy. Imports only :mod:`argparse`: the CLI builds its parser on
every run, editors' on-save hooks included.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

Subparsers = argparse._SubParsersAction  # the type argparse gives ``add_subparsers``


class Parser(argparse.ArgumentParser):
    """The ``memoryd`` parser: a value outside its choices gets a "did you mean" (``serach`` → ``search``).

    A mistyped command used to list all ~30 command names and suggest none; a command's list is
    ``--help``'s to show, so the error names the closest one instead. Smaller choice lists (``--mode``)
    are still listed. Sub-command parsers inherit the class, so ``bank``'s and ``agents``' ACTIONs
    get the same error.
    """

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib  # only on this error: the parser is built on every editor save

        names = [str(c) for c in choices]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if isinstance(action, Subparsers):
            listed = "" if close else f" (run '{self.prog} --help' for the list)"
        else:
            listed = f" (choose from {', '.join(repr(n) for n in names)})"
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{listed}{hint}")


def command(sub: Subparsers[argparse.ArgumentParser], name: str, summary: str, *examples: str, note: str = "",
            **kwargs: Any) -> argparse.ArgumentParser:
    """Add sub-command ``name``: ``summary`` is its line in the command list and opens its help page;
    ``note`` (a sentence) follows it on the page only; ``examples`` (at least one, each a whole
    command line) close the page."""
    if not examples:
        raise ValueError(f"command {name!r}: give at least one example for its --help page")
    text = summary[:1].upper() + summary[1:] + ("" if summary.endswith(".") else ".") + (f" {note}" if note else "")
    description = textwrap.fill(text, width=78)  # the raw formatter keeps the examples' lines as written
    epilog = ("examples:\n" if len(examples) > 1 else "example:\n") + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=summary, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts and budgets: ``-k 0`` is a usage error (exit 2), not a daemon error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 1 or more")
    return value


def unit_float(text: str) -> float:
    """An argparse ``type`` for scores in 0..1 (``--min-score 2`` is a usage error, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be in 0..1")
    return value
