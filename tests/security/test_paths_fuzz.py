"""Property: whatever path, prefix or namespace a confined session sends, it reads and writes only its namespace.

A live daemon holds a tree booby-trapped with every way out of ``peers/alice/`` (symlinked files and
folders into bob's folder, the owner's files and outside the root; a hard link to bob's file; a
look-alike ``peers/Bob/``). Hypothesis builds paths from ``..``, ``.``, empty parts, those link
names, case variants, NUL, lone surrogates, non-ASCII and over-long components, as relative or
absolute names, and sends them as ``get`` paths, ``search``/``context`` prefixes, ``reindex`` paths
and ``forget``/``remember`` parameters. Properties: no answer is -32603; a confined session's
answer never holds a word of a file outside its namespace; no write lands outside it; nothing
outside the root is ever indexed. Example counts stay small (the whole file runs in seconds).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.indexer.config import Config
from tests.helpers import running_daemon
from tests.security.paths_fixtures import ALICE, BOB, BOB_CAPS, OUTSIDE_WORD, TEAM, WORDS, files, words_in

INTERNAL = -32603
OWN_WORDS = {"direct:alice": {"alicequokka"}, "direct:bob": {"bobwombat"}, "direct:BOB": set(),
             "group:team": {"teamheron"}}
SESSIONS = {"direct:alice": ALICE, "direct:bob": BOB, "direct:BOB": BOB_CAPS, "group:team": TEAM}
OWN_FOLDER = {"direct:alice": "peers/alice/", "direct:bob": "peers/bob/", "direct:BOB": "peers/BOB/",
              "group:team": "groups/team/"}
FUZZ = settings(max_examples=int(os.environ.get("MEMORYD_PATH_FUZZ", "60")), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def trap(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Any, Path]]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"- The word of this file is {OUTSIDE_WORD}.\n")
    write = dataclasses.replace(Config().write, max_per_minute=100_000, max_per_turn=100_000)
    with running_daemon(tmp_path, short_dir / "m.sock", files(), write=write) as (d, client, root):
        for folder in ("peers/alice", "groups/team"):
            base = root / folder
            os.symlink(root / "peers/bob/MEMORY.md", base / "link.md")
            os.symlink(root / "peers/bob", base / "dlink")
            os.symlink(root / "peers/Bob", base / "upper")
            os.symlink(root / "user", base / "owner")
            os.symlink(outside, base / "out")
            os.symlink(outside / "secret.md", base / "out.md")
            os.link(root / "peers/bob/MEMORY.md", base / "hl.md")
        os.symlink(root / "peers/alice/MEMORY.md", root / "peers/bob/to-alice.md")
        assert client.call("reindex", {"wait": True})["done"]
        yield d, client, root


PARTS = ["peers", "groups", "alice", "bob", "Bob", "BOB", "ALICE", "team", "user", "MEMORY.md", "memory.md",
         "preferences.md", "link.md", "dlink", "upper", "owner", "out", "out.md", "hl.md", "to-alice.md", "secret.md",
         "outside", "root", "..", ".", "", "\x00", "x\x00.md", "\ud800", "ĳ", "Ａlice", "alice\u200b", "é" * 130,
         "z" * 256, "%", "_", "*", "?", "[a]", "\\"]
parts = st.one_of(st.sampled_from(PARTS), st.text(max_size=6))


@st.composite
def paths(draw: st.DrawFn, root: Path) -> str:
    body = "/".join(draw(st.lists(parts, min_size=1, max_size=7)))
    start = draw(st.sampled_from(["", "", "peers/alice/", "groups/team/", f"{root}/", f"{root}/peers/alice/", "/"]))
    return start + body + draw(st.sampled_from(["", "", "/", ".md"]))


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every regular file under ``root`` (links not followed): what a write could change."""
    out: dict[str, str] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def call(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result, or None for an error (which must never be an internal one)."""
    try:
        return client.call(method, params)
    except RpcClientError as exc:
        assert exc.code != INTERNAL, (method, params, exc.message)
        return None


def test_confined_reads_never_leave_the_namespace(trap: tuple[Any, Any, Path]) -> None:
    d, client, root = trap

    @FUZZ
    @given(who=st.sampled_from(sorted(SESSIONS)), path=paths(root), prefix=st.none() | paths(root),
           ns=st.none() | st.sampled_from(["default", "peer:alice", "peer:bob", "peer:Bob", "group:team"]))
    def prop(who: str, path: str, prefix: str | None, ns: str | None) -> None:
        session, own = SESSIONS[who], OWN_WORDS[who]
        got = call(client, "get", {"path": path, "session": session})
        if got is not None:
            assert words_in(got) <= own, (who, path, got)
        extra = {k: v for k, v in (("path_prefix", prefix), ("namespace", ns)) if v is not None}
        query = "the word of this file " + " ".join(sorted(WORDS.values()))
        found = call(client, "search", {"query": query, "mode": "keyword", "k": 50, "session": session, **extra})
        if found is not None:
            assert words_in(found) <= own, (who, extra, found)
            assert all(h["path"].startswith(OWN_FOLDER[who]) for h in found["hits"]), found
        ctx = call(client, "context", {"query": "the word of this file", "max_tokens": 400, "session": session,
                                       **extra})
        if ctx is not None:
            assert words_in(ctx) <= own, (who, extra, ctx)

    prop()
    assert d.worker.last_error is None


def test_confined_writes_never_leave_the_namespace(trap: tuple[Any, Any, Path]) -> None:
    d, client, root = trap
    contents = ["We always deploy the billing service on Fridays after lunch.",
                "The staging database is called petunia-staging and runs Postgres 16."]

    @FUZZ
    @given(who=st.sampled_from(sorted(SESSIONS)), path=paths(root), line=st.integers(1, 5),
           ns=st.none() | st.sampled_from(["default", "peer:alice", "peer:bob", "peer:Bob", "group:team",
                                           "agent:x", "peer:alice/../bob", "peer:\x00"]),
           content=st.sampled_from(contents))
    def prop(who: str, path: str, line: int, ns: str | None, content: str) -> None:
        session = SESSIONS[who]
        before = snapshot(root)
        assert call(client, "forget", {"path": path, "line": line, "session": session}) is None  # never allowed
        params: dict[str, Any] = {"content": content, "session": session}
        if ns is not None:
            params["namespace"] = ns
        res = call(client, "remember", params)
        if res is not None and res.get("path"):
            assert res["path"].startswith(OWN_FOLDER[who]), (who, ns, res)
        changed = {rel for rel, h in snapshot(root).items() if before.get(rel) != h}
        changed |= set(before) - set(snapshot(root))
        assert all(rel.startswith(OWN_FOLDER[who]) for rel in changed), (who, ns, changed)

    prop()
    assert d.worker.last_error is None


def test_reindex_never_reaches_outside_the_root(trap: tuple[Any, Any, Path]) -> None:
    d, client, root = trap

    @FUZZ
    @given(many=st.lists(paths(root), min_size=1, max_size=3), wait=st.booleans())
    def prop(many: list[str], wait: bool) -> None:
        call(client, "reindex", {"paths": many, "wait": wait})

    prop()
    assert client.call("reindex", {"paths": ["peers"], "wait": True})["done"]  # flushes the queue behind it
    owner = client.call("search", {"query": OUTSIDE_WORD, "mode": "keyword", "k": 50})
    assert OUTSIDE_WORD not in words_in(owner)
    assert d.worker.last_error is None and client.call("status")["last_error"] is None
