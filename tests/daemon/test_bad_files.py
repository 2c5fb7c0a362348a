"""Bad files in a memory root: the daemon keeps serving, and ``status`` says which file it skipped and why.

One in-process daemon (hash embedder, real socket and watcher) starts on a
root that already holds every bad file of issue 6, so the start-up reconcile
meets them all; each case is then one parametrized check. Cases that need
timing (a file vanishing or rewritten mid-read, a FIFO created while running)
or volume (10,000 tiny files) have their own tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.ingestion import files as files_mod
from tests.helpers import make_config, wait_for

MARK = "quokkamarker"
Case = tuple[Callable[[Path], None], str | None]  # (make it, expected skip reason prefix or None = indexed)


def _text(name: str) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        (root / name).write_text(f"# {name}\n\n- {MARK}{_tag(name)} here.\n", encoding="utf-8")
    return make


def _tag(name: str) -> str:
    return "".join(ch for ch in name if ch.isalnum())[:12]


def _bytes(name: str, data: bytes) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        (root / name).write_bytes(data)
    return make


def _sparse_200mb(root: Path) -> None:
    with open(root / "huge.md", "wb") as f:
        f.truncate(200 * 2**20)  # sparse: costs no disk


def _deep(root: Path) -> None:
    d = root.joinpath(*[f"d{i}" for i in range(50)])
    d.mkdir(parents=True)
    _text("deep.md")(d)


def _loop(root: Path) -> None:
    os.symlink("loop.md", root / "loop.md")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "fifo.md")


def _unix_socket(root: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(root / "x.md"))
    s.close()  # the socket file stays


def _weird_names(root: Path) -> None:
    for name in ("with space.md", "new\nline.md", "café.md"):
        _text(name)(root)


def _non_utf8_name(root: Path) -> None:
    with open(os.fsencode(root) + b"/caf\xe9-latin1.md", "wb") as f:
        f.write(f"# cafe\n\n- {MARK}latin here.\n".encode())


CASES: dict[str, Case] = {
    "binary": (_bytes("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4), "binary"),
    "nul_bytes": (_bytes("nul.md", f"# nul\n\n- {MARK}nul\x00 here.\n".encode()), "binary"),
    "200mb": (_sparse_200mb, "too-large"),
    "symlink_loop": (_loop, "unreadable"),
    "fifo": (_fifo, "not-a-regular-file"),
    "socket": (_unix_socket, "not-a-regular-file"),
    "invalid_utf8": (_bytes("badutf8.md", f"# bad\n\n- \xff\xfe {MARK}badutf8 \xc3\x28 here.\n".encode("latin-1")),
                     None),
    "utf16_bom": (_bytes("utf16.md", f"# u16\n\n- {MARK}utf16 here.\n".encode("utf-16")), None),
    "crlf": (_bytes("crlf.md", f"# crlf\r\n\r\n- {MARK}crlf here.\r\n".encode()), None),
    "one_mb_line": (_bytes("oneline.md", f"{MARK}oneline ".encode() + b"word " * 200_000 + b"\n"), None),
    "zero_bytes": (_bytes("empty.md", b""), None),
    "deep_50": (_deep, None),
    "names": (_weird_names, None),
}


@pytest.fixture(scope="module")
def bad_root() -> Iterator[tuple[Daemon, Client, Path]]:
    top = Path(tempfile.mkdtemp(prefix="mdb-", dir="/tmp"))  # short: a socket file is created in the root
    root = top / "r"
    root.mkdir()
    _text("good.md")(root)
    for make, _ in CASES.values():
        make(root)
    cfg = make_config(root, top / "data", debounce_ms=50, settle_ms=20, max_delay_ms=500)
    cfg = replace(cfg, server=replace(cfg.server, socket=top / "s.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=20)
    try:
        _wait_idle(client)
        yield d, client, root
    finally:
        client.close()
        d.shutdown()
        shutil.rmtree(top, ignore_errors=True)


def _wait_idle(client: Client, timeout: float = 30.0) -> dict[str, Any]:
    def idle() -> dict[str, Any] | None:
        st: dict[str, Any] = client.call("status")
        return st if st["pending"] == 0 and not st["reconciling"] else None

    result: dict[str, Any] = wait_for(idle, timeout, "the daemon to be idle")
    return result


def _skipped(client: Client) -> dict[str, str]:
    return {s["path"]: s["reason"] for s in client.call("status")["skipped"]}


def _found(client: Client, tag: str) -> list[dict[str, Any]]:
    hits = client.call("search", {"query": f"{MARK}{tag}", "k": 3, "mode": "keyword"})["hits"]
    return [h for h in hits if f"{MARK}{tag}" in h["text"]]


# Standalone daemons first: the module-scoped one below lives until the end of the module.


def test_non_utf8_file_name_does_not_break_the_reconcile(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _non_utf8_name(root)
    _text("good.md")(root)
    cfg = make_config(root, tmp_path / "data", debounce_ms=50, settle_ms=20, max_delay_ms=500)
    cfg = replace(cfg, server=replace(cfg.server, socket=short_dir / "s.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    try:
        with Client(cfg.socket_path, timeout=20) as client:
            _wait_idle(client)
            st = client.call("status")
            assert _found(client, "goodmd"), f"good.md not indexed; last_error={st['last_error']}"
            assert st["files"] == 2 or len(st["skipped"]) == 1
    finally:
        d.shutdown()


@pytest.mark.slow
def test_ten_thousand_tiny_files(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    for i in range(100):
        sub = root / f"d{i:02d}"
        sub.mkdir(parents=True)
        for j in range(100):
            (sub / f"n{j:02d}.md").write_text(f"- tiny {i}-{j} {MARK}t{i:02d}x{j:02d}\n")
    cfg = make_config(root, tmp_path / "data", debounce_ms=50, settle_ms=20, max_delay_ms=500)
    cfg = replace(cfg, server=replace(cfg.server, socket=short_dir / "s.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    try:
        with Client(cfg.socket_path, timeout=30) as client:
            st = _wait_idle(client, timeout=100)
            assert st["files"] == 10_000 and st["chunks"] == 10_000
            assert _found(client, "t57x42")
    finally:
        d.shutdown()


@pytest.mark.parametrize("case", sorted(k for k, v in CASES.items() if v[1] is not None))
def test_skipped_file_is_listed_with_its_reason(bad_root: tuple[Daemon, Client, Path], case: str) -> None:
    _d, client, _root = bad_root
    reason = CASES[case][1]
    assert reason is not None
    skipped = _skipped(client)
    assert any(r.startswith(reason) for r in skipped.values()), f"{case}: no {reason!r} in {skipped}"
    assert client.call("ping")["pid"] == os.getpid()  # still serving
    assert _found(client, "goodmd"), "the good file must still be indexed"


@pytest.mark.parametrize("case,tag", [("invalid_utf8", "badutf8"), ("utf16_bom", "utf16"), ("crlf", "crlf"),
                                      ("one_mb_line", "oneline"), ("deep_50", "deepmd"),
                                      ("names", "withspacemd"), ("names", "newlinemd"), ("names", "cafémd")])
def test_odd_but_textual_file_is_indexed(bad_root: tuple[Daemon, Client, Path], case: str, tag: str) -> None:
    _d, client, _root = bad_root
    hits = _found(client, tag)
    assert hits, f"{case}: marker {MARK}{tag} not searchable; skipped={_skipped(client)}"
    if case == "crlf":
        assert hits[0]["start_line"] <= 3 <= hits[0]["end_line"]  # CRLF counted as one line break


def test_zero_byte_file_is_indexed_without_chunks(bad_root: tuple[Daemon, Client, Path]) -> None:
    _d, client, _root = bad_root
    assert not any(p.endswith("empty.md") for p in _skipped(client))
    got = client.call("get", {"path": "empty.md"})
    assert got["text"] == "" and got["total_lines"] == 0


def test_status_counts_every_regular_markdown_file(bad_root: tuple[Daemon, Client, Path]) -> None:
    _d, client, _root = bad_root
    st = client.call("status")
    indexed = {"good.md", "badutf8.md", "utf16.md", "crlf.md", "oneline.md", "empty.md", "deep.md",
               "with space.md", "new\nline.md", "café.md"}
    assert st["files"] == len(indexed), st["skipped"]
    assert st["index"]["vectors"] == st["chunks"]


def test_fifo_created_while_running_never_blocks(bad_root: tuple[Daemon, Client, Path]) -> None:
    _d, client, root = bad_root
    os.mkfifo(root / "late-fifo.md")
    _text("late.md")(root)
    client.call("reindex", {"wait": True})
    assert _found(client, "latemd")
    assert any(p.endswith("late-fifo.md") for p in _skipped(client))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file regardless of its mode: cannot deny as root")
def test_permission_denied_is_listed(bad_root: tuple[Daemon, Client, Path]) -> None:
    _d, client, root = bad_root
    f = root / "secret.md"
    _text("secret.md")(root)
    f.chmod(0)
    client.call("reindex", {"wait": True})
    assert _skipped(client).get(f"{root}/secret.md", "").startswith("unreadable")


@pytest.mark.parametrize("how", ["vanish", "rewrite"])
def test_file_vanishing_or_rewritten_mid_read(bad_root: tuple[Daemon, Client, Path], how: str) -> None:
    """The read races the writer: patch the read so the change lands between open and the last fstat."""
    _d, client, root = bad_root
    target = root / f"race-{how}.md"
    _text(target.name)(root)
    real = files_mod._read_all

    def racing_read(fd: int, max_bytes: int, rel: str) -> bytes:
        data = real(fd, max_bytes, rel)
        if rel.endswith(target.name):
            if how == "vanish":
                target.unlink()
            else:
                target.write_text(f"# rewritten\n\n- {MARK}rewritten: a longer body, written mid-read.\n")
        return data

    with mock.patch.object(files_mod, "_read_all", racing_read):
        res = client.call("reindex", {"paths": [str(target)], "wait": True})
    assert "error" not in res, res
    assert client.call("ping")["pid"] == os.getpid()
    if how == "rewrite":
        assert _skipped(client).get(f"{root}/{target.name}", "").startswith("changed-while-reading")
    client.call("reindex", {"wait": True})  # the next look repairs it either way
    assert not any(target.name in p for p in _skipped(client))
    assert not _found(client, _tag(target.name)), "the old text must not stay searchable"
    assert bool(_found(client, "rewritten")) == (how == "rewrite")
