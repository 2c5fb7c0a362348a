"""Cheap facts about the running daemon for ``status``: its resident memory and its data folder's size.

Both are read on every ``status`` call, so they stay cheap: one small file from /proc, and a walk
of the data folder (a handful of files: the database, its WAL, the vector index).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def rss_bytes(status_file: Path = Path("/proc/self/status")) -> int | None:
    """Resident set size of this process (``VmRSS``), or None where /proc does not say (not Linux)."""
    try:
        text = status_file.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # the kernel writes kB
    return None


def tree_bytes(folder: Path) -> int | None:
    """Sum of the sizes of the regular files under ``folder`` (links not followed); None if it is no folder."""
    if not folder.is_dir():
        return None
    total = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:  # removed while walking (a WAL checkpoint): it no longer counts
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total
