"""What an indexing call did (:class:`IndexStats`), and how file names are made storable and printable."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class IndexStats:
    """What one indexing call did (summed over its files)."""

    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_kept: int = 0
    embedded: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    skipped: dict[str, str] = field(default_factory=dict)

    def merge(self, other: IndexStats) -> None:
        for name in self.__dataclass_fields__:
            mine = getattr(self, name)
            if isinstance(mine, dict):
                mine.update(getattr(other, name))
            else:
                setattr(self, name, mine + getattr(other, name))


Progress = Callable[[int, int, IndexStats], None]  # (files done, files total, stats so far)


def storable(name: str) -> bool:
    """Whether a path can be stored as text (file names are bytes on Linux; not all are UTF-8)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(name: str) -> str:
    """A name with undecodable bytes shown as ``\\xNN``, for logs and ``status``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
