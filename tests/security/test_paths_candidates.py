"""Dedup candidates never include a file the writer would refuse (a symlink or a hard link).

Otherwise the nearest entry could live in a link, the verdict would be "replace" or
"reinforce" there, and a plain remember would fail with -32024 instead of appending.
"""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.indexer.write.candidates import _writable


def test_links_are_not_dedup_candidates(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("- a fact\n")
    os.symlink("real.md", tmp_path / "soft.md")
    (tmp_path / "other.md").write_text("- another fact\n")
    os.link(tmp_path / "other.md", tmp_path / "hard.md")
    assert _writable(tmp_path, "real.md")
    assert not _writable(tmp_path, "soft.md")
    assert not _writable(tmp_path, "hard.md") and not _writable(tmp_path, "other.md")
