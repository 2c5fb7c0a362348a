"""Per-entry importance and reinforcement, kept in a marker at the end of the entry's line.

``- Prefers Vim <!-- memoryd: importance=4 reinforced=2 -->``

Why a trailing HTML comment and not front matter: it travels with its entry
when the user moves, edits or re-orders lines (a front-matter mapping keyed by
an entry hash goes stale as soon as the text is touched), it needs no front
matter (a file without one still records every reinforcement, and no line of a
user's file shifts), Markdown renderers hide it, and the index sees it in the
chunk text, so search hits can report it without a schema change.

The marker is never part of an entry's text: :mod:`memoryd.indexer.markdown.mdlines`
splits it off, and :func:`strip` removes it from what is embedded and what
feeds the keyword index, so counting a reinforcement never changes retrieval
by itself. Unknown ``key=value`` pairs are kept as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"[ \t]*<!--[ \t]*memoryd:[ \t]*((?:[a-z_]+=[^\s<>]*[ \t]*)*)-->[ \t]*$")
_ANY = re.compile(r"[ \t]*<!--[ \t]*memoryd:[ \t]*(?:[a-z_]+=[^\s<>]*[ \t]*)*-->[ \t]*$", re.MULTILINE)
_PAIR = re.compile(r"([a-z_]+)=([^\s<>]*)")
IMPORTANCE_MIN, IMPORTANCE_MAX = 1, 5  # the router's scale (indexer/write/router.py)


@dataclass(frozen=True)
class EntryMeta:
    """What one entry's marker says; ``importance`` None: never rated (the user wrote the entry)."""

    importance: int | None = None
    reinforced: int = 0
    extra: tuple[tuple[str, str], ...] = ()

    def render(self) -> str:
        """The marker, with its leading space; empty when there is nothing to record."""
        pairs = []
        if self.importance is not None:
            pairs.append(f"importance={self.importance}")
        if self.reinforced > 0:
            pairs.append(f"reinforced={self.reinforced}")
        pairs += [f"{k}={v}" for k, v in self.extra]
        return f" <!-- memoryd: {' '.join(pairs)} -->" if pairs else ""


def split(line: str) -> tuple[str, EntryMeta | None]:
    """``line`` without its trailing marker, and the marker's content (None: no marker)."""
    m = _MARKER.search(line)
    if m is None:
        return line, None
    return line[: m.start()], parse(m.group(1))


def parse(body: str) -> EntryMeta:
    """The pairs of a marker body; a value that is not a number is kept as an unknown pair."""
    importance: int | None = None
    reinforced = 0
    extra: list[tuple[str, str]] = []
    for key, value in _PAIR.findall(body):
        if key == "importance" and value.isdigit():
            importance = min(IMPORTANCE_MAX, max(IMPORTANCE_MIN, int(value)))
        elif key == "reinforced" and value.isdigit():
            reinforced = int(value)
        else:
            extra.append((key, value))
    return EntryMeta(importance, reinforced, tuple(extra))


def strip(text: str) -> str:
    """``text`` with every entry marker removed (what the model and the keyword index see)."""
    return _ANY.sub("", text) if "memoryd:" in text else text


def summarize(text: str) -> EntryMeta | None:
    """The strongest signal among the markers of a passage: highest importance, most reinforcements.

    None when the passage holds no marker (a hit then gets no extra fields).
    """
    if "memoryd:" not in text:
        return None
    metas = [meta for line in text.split("\n") for meta in [split(line)[1]] if meta is not None]
    if not metas:
        return None
    rated = [m.importance for m in metas if m.importance is not None]
    return EntryMeta(max(rated) if rated else None, max(m.reinforced for m in metas))
