"""The path resolver (indexer/pathguard.py) and the read rule on resolved paths (access.read_refusal), in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.indexer.access import Session, read_refusal, resolve_target, scoped_prefix
from memoryd.indexer.errors import BadTarget
from memoryd.indexer.pathguard import MAX_NAME_BYTES, MAX_PATH_BYTES, PathGuard, PathRefused, check_text, normalize

ALICE = Session("direct", peer="alice")
OWNER = Session("owner")


@pytest.mark.parametrize(("raw", "rule"), [
    ("a\x00b.md", "NUL"), ("..", "'..'"), ("a/../b.md", "'..'"), ("/r/../x", "'..'"), ("a/..", "'..'"),
    ("x" * (MAX_NAME_BYTES + 1), "component"), ("é" * 128, "component"),  # 256 bytes in UTF-8
    ("a/" * (MAX_PATH_BYTES // 2 + 1), "bytes long"), ("\ud800", "UTF-8"),
])
def test_check_text_refuses(raw: str, rule: str) -> None:
    with pytest.raises(PathRefused, match=rule) as err:
        check_text(raw)
    assert "\x00" not in str(err.value) and len(str(err.value)) < 400


def test_check_text_accepts_ordinary_names() -> None:
    for raw in ("MEMORY.md", "peers/alice/MEMORY.md", "笔记/2026-01-02.md", "a..b.md", "...", "x" * MAX_NAME_BYTES):
        assert check_text(raw) == raw
    assert normalize("./peers//alice/./MEMORY.md") == "peers/alice/MEMORY.md"
    assert normalize("/r//a/./b") == "/r/a/b" and normalize(".") == ""


@pytest.fixture
def tree(tmp_path: Path) -> tuple[PathGuard, Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    for sub in ("peers/alice", "peers/bob", "peers/Bob"):
        (root / sub).mkdir(parents=True)
        (root / sub / "MEMORY.md").write_text("- x\n")
    outside.mkdir()
    (outside / "s.md").write_text("- s\n")
    os.symlink("../bob/MEMORY.md", root / "peers/alice/to-bob.md")
    os.symlink("../bob", root / "peers/alice/bobdir")
    os.symlink(outside / "s.md", root / "peers/alice/out.md")
    os.symlink("MEMORY.md", root / "peers/alice/self.md")
    os.symlink("loop.md", root / "peers/alice/loop.md")
    os.link(root / "peers/bob/MEMORY.md", root / "peers/alice/hard.md")
    return PathGuard([root]), root, outside


def test_resolve_follows_links_and_locates_the_result(tree: tuple[PathGuard, Path, Path]) -> None:
    guard, root, _outside = tree
    r = guard.resolve(root, "peers/alice/to-bob.md")
    assert (r.rel, r.real_rel, r.real_root, r.links) == ("peers/alice/to-bob.md", "peers/bob/MEMORY.md", root, 2)
    assert guard.resolve(root, "peers/alice/bobdir/MEMORY.md").real_rel == "peers/bob/MEMORY.md"
    assert guard.resolve(root, "peers/alice/out.md").real_root is None
    assert guard.resolve(root, "peers/alice/self.md").real_rel == "peers/alice/MEMORY.md"
    assert not guard.resolve(root, "peers/alice/loop.md").exists
    assert guard.resolve(root, "").real_rel == "" and guard.resolve(root, "").is_dir
    assert guard.candidates(f"{root}/peers/alice/MEMORY.md") == [(root, "peers/alice/MEMORY.md")]
    assert guard.candidates(f"{root}") == [(root, "")]
    assert guard.candidates(f"{root}x/a.md") == []  # a sibling whose name starts like the root
    assert guard.candidates("peers/carol/MEMORY.md") == []


@pytest.mark.parametrize(("rel", "allowed"), [
    ("peers/alice/MEMORY.md", True), ("peers/alice/self.md", True), ("peers/alice/to-bob.md", False),
    ("peers/alice/bobdir/MEMORY.md", False), ("peers/alice/out.md", False), ("peers/alice/hard.md", False),
    ("peers/bob/MEMORY.md", False), ("peers/Bob/MEMORY.md", False),
    ("peers/alice/loop.md", True),  # allowed to try: the read then fails (-32010), nothing leaks
])
def test_read_refusal_is_judged_on_the_resolved_path(tree: tuple[PathGuard, Path, Path], rel: str,
                                                     allowed: bool) -> None:
    guard, root, _outside = tree
    r = guard.resolve(root, rel)
    assert (read_refusal(ALICE, root, r) is None) is allowed, read_refusal(ALICE, root, r)
    if r.inside:
        assert read_refusal(OWNER, root, r) is None  # the owner reads anything inside the roots
    assert read_refusal(Session("direct", peer="ALICE"), root, r) is not None  # case is kept


def test_writes_refuse_folder_links_and_hard_links(tree: tuple[PathGuard, Path, Path]) -> None:
    _guard, root, _outside = tree
    os.symlink("bob", root / "peers/carol")
    for rel in ("peers/carol/MEMORY.md", "peers/alice/hard.md", "peers/alice/bobdir/new.md", "peers/alice/self.md",
                "peers/alice/MEMORY.md/x.md"):
        with pytest.raises(BadTarget):
            resolve_target(root, rel)
    assert resolve_target(root, "peers/alice/MEMORY.md") == root / "peers/alice/MEMORY.md"
    assert resolve_target(root, "peers/dave/MEMORY.md") == root / "peers/dave/MEMORY.md"  # not there yet: fine


def test_scoped_prefix_checks_the_text(tmp_path: Path) -> None:
    for bad in ("peers/alice/../bob/", "\x00", "peers/" + "x" * 300):
        for session in (OWNER, ALICE):
            with pytest.raises(PathRefused):
                scoped_prefix(session, tmp_path, bad)
    assert scoped_prefix(OWNER, tmp_path, "./peers//bob/") == "peers/bob/"
