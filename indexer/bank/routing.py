"""Intent-driven Routing Rules and the sub-folder ``index.md`` routers, derived from a :class:`Layout`.

Routing Rules route by *what you are about to do*, not by file list (seed
002); the rows present depend only on which details files and folders exist
and which folders have an ``index.md``. A router ``index.md`` has one line
per file in its folder; maintaining one adds lines for new files and removes
lines whose file is gone, leaving every other line (and USER blocks) alone.
"""

from __future__ import annotations

import re

from memoryd.indexer.bank.layout import DETAILS, INDEX, STANDARD_FILES, STANDARD_FOLDERS, Layout
from memoryd.indexer.bank.model import ContentChange
from memoryd.indexer.bank.sections import lines_outside_fences, wrap_generated
from memoryd.indexer.bank.templates import LEGACY_NOTE, ROUTING
from memoryd.indexer.markdown.memblocks import (
    MACHINE_END,
    MACHINE_START,
    USER_END,
    USER_START,
    machine_span,
    user_spans,
)

_P = f"memory-bank/{DETAILS}"
_INTENTS = {
    "tech.md": "Learn the tech stack, commands or environment",
    "patterns.md": "Check a technical decision or convention",
    "progress.md": "See progress or recent changes",
    "requirements": "Work on a requirement or feature",
    "design": "Change the design or architecture",
    "learnings": "Debug, or avoid a known pitfall",
}
#: Files and folders ``remember`` creates in a bank (indexer/write/router.py): their Routing Rules rows.
_REMEMBERED = {
    "user.md": "Follow the user's instructions and preferences",
    "entities.md": "Look up a person, team or system",
    "journal": "See what happened on a given day",
}
_VERBS = {"design": "When modifying", "requirements": "When working on", "learnings": "When debugging"}
_LINK = re.compile(r"\]\((?:\./)?([^)\s/#:]+\.md)\)")


def routing_body(layout: Layout) -> str:
    """The generated part of Routing Rules for ``layout``."""
    rows = [f"| {_INTENTS[f]} | `{_P}/{f}` |" for f in STANDARD_FILES if f in layout.top]
    rows += [f"| {_INTENTS[d]} | {_folder_target(layout, d)} |" for d in STANDARD_FOLDERS if d in layout.folders]
    rows += [f"| {_REMEMBERED.get(f) or 'Anything about **' + f.removesuffix('.md') + '**'} | `{_P}/{f}` |"
             for f in sorted(layout.top) if f not in STANDARD_FILES]
    rows += [f"| {_REMEMBERED.get(d) or 'Anything in the **' + d + '** folder'} | {_folder_target(layout, d)} |"
             for d in sorted(layout.folders) if d not in STANDARD_FOLDERS]
    if layout.has_legacy:
        rows.append("| Look up pre-v7.1 routing or archived notes | `memory-bank/legacy.md` |")
    rows.append(f"| Not sure which file | glob `{_P}/**/*.md`, then read |")
    return ("Pick the 1–3 files that match what you are about to do; stop reading once you have enough.\n\n"
            "| Intent | Read |\n|---|---|\n" + "\n".join(rows) + "\n")


def _folder_target(layout: Layout, folder: str) -> str:
    if folder in layout.indexed:
        return f"`{_P}/{folder}/{INDEX}`"
    return f"glob `{_P}/{folder}/*.md`"


def routing_section(layout: Layout, legacy_note: bool = False) -> str:
    """A whole new Routing Rules section; ``legacy_note`` when an old ``## Routing Rules`` stays above it."""
    return (f"{ROUTING[0]}\n\n{LEGACY_NOTE if legacy_note else ''}{wrap_generated(routing_body(layout))}\n"
            "### Project-specific intents (add rows as needed)\n\n| Intent | Read |\n|---|---|\n")


def _entry(folder: str, name: str, title: str) -> str:
    return f"- {_VERBS.get(folder, 'For')} **{title}**, read [{name}]({name})"


def new_index(folder: str, titles: dict[str, str]) -> str:
    """A router ``index.md`` for ``folder`` listing ``titles`` (file name → title) in name order."""
    lines = "".join(_entry(folder, n, titles[n]) + "\n" for n in sorted(titles))
    return (f"# {folder.replace('-', ' ').replace('_', ' ').title()} Router\n\n"
            "> Maintained by memoryd: one line per file in this folder. Your own notes go in the USER block.\n\n"
            f"{MACHINE_START}\n{lines}{MACHINE_END}\n\n{USER_START}\n{USER_END}\n")


def maintain_index(text: str, folder: str, titles: dict[str, str]) -> tuple[str, list[ContentChange]]:
    """``text`` with entry lines added for unlisted files and removed for files that are gone.

    ``titles`` maps every file the folder will hold (``index.md`` excluded) to its title. Only lines
    outside USER blocks and fences that link a bare ``name.md`` count as entries.
    """
    spans = user_spans(text)
    linked: set[str] = set()
    drop: list[tuple[int, int, str]] = []
    last_entry: tuple[int, str] | None = None
    for off, line in lines_outside_fences(text):
        if any(a <= off < b for a, b in spans):
            continue
        targets = [t for t in _LINK.findall(line) if t != INDEX]
        if not targets:
            continue
        if all(t not in titles for t in targets):
            drop.append((off, off + len(line), targets[0]))
            continue
        linked.update(targets)
        last_entry = (off + len(line), line)
    missing = sorted(set(titles) - linked)
    changes = [ContentChange("remove_entry", t) for _, _, t in drop] + [ContentChange("add_entry", n) for n in missing]
    if not changes:
        return text, []
    add = "".join(_styled(folder, n, titles[n], last_entry[1] if last_entry else None) for n in missing)
    at = last_entry[0] if last_entry else _insert_point(text)
    if at > 0 and not text[:at].endswith("\n"):
        add = "\n" + add
    out = text[:at] + add + text[at:]
    for a, b, _ in reversed(drop):  # drops lie before or after ``at``; shift the ones after it
        shift = len(add) if a >= at else 0
        out = out[: a + shift] + out[b + shift:]
    return out, changes


def _styled(folder: str, name: str, title: str, like: str | None) -> str:
    if like is not None and like.lstrip().startswith("|"):
        cols = max(2, like.strip().count("|") - 1)
        return f"| [{name}]({name}) | {title.replace('|', '/')} |" + " |" * (cols - 2) + "\n"
    return _entry(folder, name, title) + "\n"


def _insert_point(text: str) -> int:
    span = machine_span(text)
    if span is not None:
        return span[1]
    spans = user_spans(text)
    return spans[0][0] if spans else len(text)
