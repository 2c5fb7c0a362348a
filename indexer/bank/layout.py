"""The shape of ``memory-bank/details/`` as it will be once a plan is applied.

Routing Rules and the sub-folder ``index.md`` files depend only on this
shape (which files and folders exist, which folders have an index), so a plan
computes the shape *after* its own creates and moves and derives both from it.
That is what makes a second ``apply`` a no-op: it reads the same shape back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DETAILS = "details"
INDEX = "index.md"
LEGACY = "legacy.md"
STANDARD_FILES = ("tech.md", "patterns.md", "progress.md")
STANDARD_FOLDERS = ("design", "requirements", "learnings")
INDEX_THRESHOLD = 8  # the v7.1 layout: an index.md is suggested when a folder holds more than 8 files


@dataclass
class Layout:
    """``top`` = .md files directly in details/; ``folders`` = sub-folder → .md files directly in it
    (``index.md`` excluded); ``indexed`` = sub-folders that have or will have an ``index.md``."""

    top: set[str] = field(default_factory=set)
    folders: dict[str, set[str]] = field(default_factory=dict)
    indexed: set[str] = field(default_factory=set)
    has_legacy: bool = False

    def add(self, rel: str) -> None:
        """Record a file at ``rel`` (relative to details/); deeper files count for their top folder only."""
        parts = rel.split("/")
        if len(parts) == 1:
            self.top.add(parts[0])
            return
        files = self.folders.setdefault(parts[0], set())
        if len(parts) == 2:
            if parts[1] == INDEX:
                self.indexed.add(parts[0])
            else:
                files.add(parts[1])

    def add_folder(self, name: str) -> None:
        self.folders.setdefault(name, set())


def read_layout(bank: Path) -> Layout:
    """The current shape of ``bank/details`` (Markdown files only, hidden entries skipped)."""
    layout = Layout(has_legacy=(bank / LEGACY).is_file())
    details = bank / DETAILS
    if not details.is_dir():
        return layout
    for entry in sorted(details.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            layout.add_folder(entry.name)
            for f in sorted(entry.iterdir()):
                if f.is_file() and f.suffix == ".md":
                    layout.add(f"{entry.name}/{f.name}")
        elif entry.is_file() and entry.suffix == ".md":
            layout.add(entry.name)
    return layout


def title_of(path: Path, fallback: str) -> str:
    """The first level-1 heading in the first 30 lines of ``path``, else ``fallback``."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i >= 30:
                    break
                if line.startswith("# "):
                    return line[2:].strip() or fallback
    except OSError:
        pass
    return fallback


def stem_title(name: str) -> str:
    return name.removesuffix(".md").replace("-", " ").replace("_", " ").strip() or name
