"""Hidden directories are skipped like hidden files unless an include pattern names them
(issue #28 item 5): the same rule for the path filter, the watcher, reconcile and ``memoryd index``."""

from __future__ import annotations

from pathlib import Path

import pytest
from watchdog.events import DirMovedEvent, FileCreatedEvent, FileDeletedEvent

from memoryd.daemon.oneshot import run_index
from memoryd.daemon.watch.debouncer import Change
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.watch.watcher import translate
from memoryd.indexer.config import Config
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from tests.helpers import make_config

DEFAULT = PathFilter(Config().watch.include, Config().watch.exclude)
OPTED_IN = PathFilter(("*.md", ".memory/*.md"), (".git/*",))


@pytest.mark.parametrize(
    ("rel", "default", "opted_in"),
    [
        ("notes.md", True, True),
        (".hidden/x.md", False, False),
        ("a/.cache/b/x.md", False, False),  # at any depth
        (".memory/x.md", False, True),
        ("sub/.memory/deep/x.md", False, True),  # an unanchored pattern names it at any depth
        (".memory/x.txt", False, False),  # the pattern that names the folder must match the file
        (".memory/.other/x.md", False, False),  # each hidden folder must be named
        (".git/x.md", False, False),
    ],
)
def test_files_below_hidden_folders_are_skipped_unless_included(rel: str, default: bool, opted_in: bool) -> None:
    assert DEFAULT(rel) is default and DEFAULT.accept_delete(rel) is default
    assert OPTED_IN(rel) is opted_in


def test_hidden_folders_are_not_walked_unless_included() -> None:
    assert not DEFAULT.accept_dir(".hidden") and not DEFAULT.accept_dir("a/.cache")
    assert DEFAULT.accept_dir("memory") and DEFAULT.accept_dir("a/b")
    assert OPTED_IN.accept_dir(".memory") and OPTED_IN.accept_dir("x/.memory/deep")
    assert not OPTED_IN.accept_dir(".other")
    anchored = PathFilter(("*.md", "/.cursor/rules/*.md"), ())
    assert anchored(".cursor/rules/a.md") and not anchored("x/.cursor/rules/a.md")
    assert not anchored(".cursor/a.txt") and not anchored(".rules/a.md")
    everything = PathFilter(("*.md", ".*/*.md"), (".git/*",))  # the way to index every hidden folder
    assert everything(".a/x.md") and everything("b/.c/d/x.md") and not everything(".git/x.md")


R = Path("/w/root")


def test_the_watcher_ignores_hidden_folders() -> None:
    assert translate(FileCreatedEvent("/w/root/.hidden/x.md"), "/w/root", R, DEFAULT) == []
    assert translate(FileDeletedEvent("/w/root/.hidden/x.md"), "/w/root", R, DEFAULT) == []
    assert translate(DirMovedEvent("/w/root/.hidden", "/w/root/.hidden2"), "/w/root", R, DEFAULT) == []
    created = translate(FileCreatedEvent("/w/root/.memory/x.md"), "/w/root", R, OPTED_IN)
    assert [(c.kind, c.path) for c in created] == [("upsert", R / ".memory/x.md")]
    assert translate(FileDeletedEvent("/w/root/.memory/x.md"), "/w/root", R, OPTED_IN) == [
        Change("delete", R / ".memory/x.md")]


def _tree(root: Path) -> None:
    for rel in ("notes.md", ".hidden/x.md", "sub/.cache/y.md", ".memory/z.md", "memory/2024-01-01.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\nSomething about {rel}.\n")


def _indexed(idx: MemoryIndex, root: Path) -> set[str]:
    return set(idx.store.files(idx.store.root_id(root)))


def test_reconcile_skips_hidden_folders_and_drops_files_indexed_there_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root)
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        everything = PathFilter(("*.md", ".*/*.md"), ())  # what an older memoryd indexed
        reconcile(idx, [root], everything, everything.accept_dir)
        assert ".hidden/x.md" in _indexed(idx, root)
        reconcile(idx, [root], DEFAULT, DEFAULT.accept_dir)
        assert _indexed(idx, root) == {"notes.md", "memory/2024-01-01.md"}
        reconcile(idx, [root], OPTED_IN, OPTED_IN.accept_dir)
        assert _indexed(idx, root) == {"notes.md", "memory/2024-01-01.md", ".memory/z.md"}
    finally:
        idx.close()


def test_memoryd_index_follows_the_configured_include(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    _tree(root)
    cfg = make_config(root, tmp_path / "data", include=("*.md", ".memory/*.md"))
    assert run_index(cfg) == 0
    assert "index: 3 files" in capsys.readouterr().out
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        assert _indexed(idx, root) == {"notes.md", "memory/2024-01-01.md", ".memory/z.md"}
    finally:
        idx.close()
