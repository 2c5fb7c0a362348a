"""``list`` and ``stats`` without reading every memory file per call (indexer/write/listing.py): what
changed is read again, what did not is not, and the answers match a full read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.indexer.write import listing
from memoryd.indexer.write.entries import memory_files, stats
from memoryd.indexer.write.listing import RECHECK_S, FolderCache

OLD_NS = 1_000_000_000 * 1_000_000_000  # 2001: no time that recent ("racy") to distrust


def _folder(root: Path, n: int = 20) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "peers" / "alice").mkdir(parents=True)
    for i in range(n):
        (root / "memory" / f"2024-01-{i + 1:02d}.md").write_text(f"# Day {i}\n\n- one {i}\n- two {i}\n")
    (root / "peers" / "alice" / "MEMORY.md").write_text("# Alice\n\n## Facts\n\n- likes tea\n")
    (root / "MEMORY.md").write_text("# Memory\n\n## Decisions\n\n- use sqlite\n- keep it small\n- ship\n")
    for dirpath, _dirs, files in os.walk(root):
        for name in [*files, "."]:
            os.utime(Path(dirpath) / name, ns=(OLD_NS, OLD_NS))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = listing.read_memory_file

    def counting(path: Path, *a: object, **kw: object) -> object:
        seen.append(str(path))
        return real(path, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(listing, "read_memory_file", counting)
    return seen


def _full(root: Path) -> dict[str, dict[str, int]]:
    return stats(memory_files(root, None, lambda rel: True, 10_000_000))


def test_stats_match_a_full_read_and_a_second_call_reads_nothing(tmp_path: Path, reads: list[str]) -> None:
    _folder(tmp_path)
    cache = FolderCache(10_000_000, clock=Clock())
    rels = cache.paths(tmp_path, None, lambda rel: True)
    assert cache.stats(tmp_path, rels) == _full(tmp_path)
    assert len(reads) == 22
    reads.clear()
    again = cache.paths(tmp_path, None, lambda rel: True)
    assert cache.stats(tmp_path, again) == _full(tmp_path) and reads == []


def test_a_new_and_a_removed_file_show_at_once(tmp_path: Path, reads: list[str]) -> None:
    _folder(tmp_path)
    cache = FolderCache(10_000_000, clock=Clock())
    cache.stats(tmp_path, cache.paths(tmp_path, None, lambda rel: True))
    (tmp_path / "memory" / "2024-02-01.md").write_text("# New\n\n- fresh\n")  # the folder's time moves
    (tmp_path / "memory" / "2024-01-01.md").unlink()
    rels = cache.paths(tmp_path, None, lambda rel: True)
    assert "memory/2024-02-01.md" in rels and "memory/2024-01-01.md" not in rels
    assert cache.stats(tmp_path, rels) == _full(tmp_path)


def test_an_edit_in_place_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    """A file changed within the last seconds is never trusted from the cache (same-tick changes)."""
    _folder(tmp_path)
    (tmp_path / "MEMORY.md").write_text("# Memory\n\n- just written\n")  # its time: now
    cache = FolderCache(10_000_000, clock=Clock())  # the check time stands still: only raciness re-reads
    rels = cache.paths(tmp_path, None, lambda rel: True)
    cache.stats(tmp_path, rels)
    with open(tmp_path / "MEMORY.md", "a") as f:  # in place, within the same second: the folder's time stays
        f.write("- appended\n")
    assert cache.stats(tmp_path, rels) == _full(tmp_path)


def test_an_old_looking_edit_in_place_shows_after_the_recheck_time(tmp_path: Path, reads: list[str]) -> None:
    _folder(tmp_path)
    clock = Clock()
    cache = FolderCache(10_000_000, clock=clock)
    rels = cache.paths(tmp_path, None, lambda rel: True)
    before = cache.stats(tmp_path, rels)
    path = tmp_path / "MEMORY.md"
    with open(path, "a") as f:
        f.write("- appended\n")
    os.utime(path, ns=(OLD_NS + 5, OLD_NS + 5))  # a time in the past, as a restored backup has
    clock.now += RECHECK_S / 2
    reads.clear()
    assert cache.stats(tmp_path, rels) == before and reads == []  # not stat'ed again yet: at most RECHECK_S
    clock.now += RECHECK_S
    assert cache.stats(tmp_path, rels) == _full(tmp_path) and reads == [str(path)]


def test_files_from_reads_only_what_the_page_needs(tmp_path: Path, reads: list[str]) -> None:
    _folder(tmp_path, n=50)
    cache = FolderCache(10_000_000, clock=Clock())
    rels = cache.paths(tmp_path, None, lambda rel: True)
    cache.stats(tmp_path, rels)
    reads.clear()
    it = cache.files_from(tmp_path, rels, after="memory/2024-01-40.md")
    first = [next(it).rel for _ in range(2)]
    assert first == ["memory/2024-01-40.md", "memory/2024-01-41.md"] and len(reads) == 2


def test_a_namespace_walks_only_its_folder(tmp_path: Path) -> None:
    from memoryd.indexer.access import DEFAULT, Namespace

    _folder(tmp_path)
    cache = FolderCache(10_000_000, clock=Clock())
    assert cache.paths(tmp_path, Namespace("peer", "alice"), lambda rel: True) == ["peers/alice/MEMORY.md"]
    assert "peers/alice/MEMORY.md" not in cache.paths(tmp_path, DEFAULT, lambda rel: True)
