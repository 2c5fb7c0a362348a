"""The ``files`` socket method: what a session may list, through the resolver, page by page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.daemon.api.files import FileMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter

OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())
ALICE = {"kind": "direct", "peer": "alice"}
FILES = ["MEMORY.md", "memory/2026-01-02.md", "memory/notes.txt", "peers/alice/MEMORY.md", "peers/bob/MEMORY.md",
         ".git/x.md"]


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    first, second = tmp_path / "one", tmp_path / "two"
    for rel in FILES:
        (first / rel).parent.mkdir(parents=True, exist_ok=True)
        (first / rel).write_text(f"- {rel}\n")
    second.mkdir()
    (second / "MEMORY.md").write_text("- second root\n")
    return [first, second]


def methods(roots: list[Path]) -> FileMethods:
    root_map = RootMap(roots)
    return FileMethods(roots=lambda: root_map, path_filter=PathFilter(("*.md",), (".git/*",)))


def listed(m: FileMethods, **params: object) -> list[str]:
    res = m.files(dict(params), OWNER)
    return [f"{Path(f['root']).name}:{f['path']}" for f in res["files"]]


def test_owner_lists_every_memory_file_of_every_root_sorted(roots: list[Path]) -> None:
    res = methods(roots).files({}, OWNER)
    assert [(Path(f["root"]).name, f["path"]) for f in res["files"]] == [
        ("one", "MEMORY.md"), ("one", "memory/2026-01-02.md"), ("one", "peers/alice/MEMORY.md"),
        ("one", "peers/bob/MEMORY.md"), ("two", "MEMORY.md")]
    assert res["next_offset"] is None
    first = res["files"][0]
    assert first["size"] == len("- MEMORY.md\n") and first["mtime"] > 0


def test_a_direct_session_lists_only_its_own_folder(roots: list[Path]) -> None:
    m = methods(roots)
    assert listed(m, session=ALICE) == ["one:peers/alice/MEMORY.md"]
    assert listed(m, session=ALICE, namespace="peer:bob") == []
    with pytest.raises(RpcError, match="may only search"):
        m.files({"session": ALICE, "path_prefix": "peers/bob/"}, OWNER)


def test_a_link_out_of_the_folder_is_not_listed(roots: list[Path], tmp_path: Path) -> None:
    alice = roots[0] / "peers/alice"
    (alice / "bob.md").symlink_to(roots[0] / "peers/bob/MEMORY.md")
    outside = tmp_path / "secret.md"
    outside.write_text("- secret\n")
    (roots[0] / "outside.md").symlink_to(outside)
    m = methods(roots)
    assert listed(m, session=ALICE) == ["one:peers/alice/MEMORY.md"]
    assert "one:outside.md" not in listed(m)
    assert "one:peers/alice/bob.md" in listed(m)  # the owner may read it where it leads


def test_namespace_and_path_prefix_narrow_the_list(roots: list[Path]) -> None:
    m = methods(roots)
    assert listed(m, namespace="default") == ["one:MEMORY.md", "one:memory/2026-01-02.md", "two:MEMORY.md"]
    assert listed(m, path_prefix="memory/") == ["one:memory/2026-01-02.md"]
    assert listed(m, path_prefix=f"{roots[1]}/") == ["two:MEMORY.md"]
    assert listed(m, path_prefix=str(roots[0].parent)) == listed(m)


def test_pages_follow_each_other(roots: list[Path]) -> None:
    m = methods(roots)
    first = m.files({"limit": 2}, OWNER)
    second = m.files({"limit": 2, "offset": first["next_offset"]}, OWNER)
    third = m.files({"limit": 2, "offset": second["next_offset"]}, OWNER)
    assert (first["next_offset"], second["next_offset"], third["next_offset"]) == (2, 4, None)
    assert [f["path"] for p in (first, second, third) for f in p["files"]] == [f["path"] for f in
                                                                              m.files({}, OWNER)["files"]]


@pytest.mark.parametrize(("params", "expect"), [
    ({"limit": 0}, "param 'limit' must be in 1..5000, got 0"),
    ({"offset": -1}, "param 'offset' must be >= 0, got -1"),
    ({"glob": "*.md"}, "unknown param 'glob'"),
])
def test_bad_params_name_the_param(roots: list[Path], params: dict[str, object], expect: str) -> None:
    with pytest.raises(InvalidParams, match=expect.replace("(", r"\(").replace(".", r"\.")):
        methods(roots).files(params, OWNER)
