"""The built-in default memory folder, so that ``memoryd run`` works out of the box."""

from __future__ import annotations

from pathlib import Path

EXAMPLE_NOTE = """\
# MEMORY

Welcome to memoryd. This folder is watched: save a Markdown file here and it is
searchable within a couple of seconds.

## Decisions

- memoryd keeps its index in ~/.local/state/memoryd and never edits these notes unless asked to.
- Search it with `memoryd search "what did we decide"`.

## Preferences

- The user prefers short answers with examples.
"""


def ensure_default_root(root: Path) -> bool:
    """Create the default root with an example ``MEMORY.md`` if missing; True if created."""
    if root.exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    note = root / "MEMORY.md"
    if not note.exists():
        note.write_text(EXAMPLE_NOTE, encoding="utf-8")
    return True
