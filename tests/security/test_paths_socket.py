"""Regressions for the path bypasses of issue #15, through the socket (docs/security/paths.md).

Each test is one reproduction: ``..`` out of a peer folder, symlinks and hard links between
namespaces, ``reindex`` outside the roots, case-folded scope filters, NUL and over-long names.
The bar: a clear error (-32020 denied, -32024 refused path, -32602/-32010 outside the roots),
never -32603, nothing read, nothing indexed, nothing written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import RpcClientError
from tests.helpers import ready, wait_for
from tests.security.paths_fixtures import ALICE, BOB, BOB_CAPS, OUTSIDE_WORD, TEAM, WORDS, tree, words_in

DENIED, BAD_TARGET, INVALID, NOT_INDEXED, INTERNAL = -32020, -32024, -32602, -32010, -32603


@pytest.fixture
def env(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Any, Path, Path]]:
    with tree(tmp_path, short_dir) as t:
        yield t


def refused(client: Any, method: str, params: dict[str, Any]) -> RpcClientError:
    with pytest.raises(RpcClientError) as err:
        client.call(method, params)
    assert err.value.code != INTERNAL, err.value.message
    return err.value


def search(client: Any, session: dict[str, Any] | None, query: str, **extra: Any) -> set[str]:
    params: dict[str, Any] = {"query": query, "mode": "keyword", "k": 50, **extra}
    if session is not None:
        params["session"] = session
    return words_in(client.call("search", params))


# -- 1. '..' out of a peer folder ----------------------------------------------------------


@pytest.mark.parametrize("path", ["peers/alice/../bob/MEMORY.md", "peers/alice/../../user/preferences.md",
                                  "peers/alice/./../bob/MEMORY.md", "peers/alice/..", "./peers/alice/../../MEMORY.md"])
def test_dotdot_out_of_a_peer_folder_is_refused(env: Any, path: str) -> None:
    _d, client, _root, _out = env
    err = refused(client, "get", {"path": path, "session": ALICE})
    assert err.code == BAD_TARGET and "'..'" in err.message


def test_dotdot_is_refused_for_the_owner_too_and_absolute_dotdot(env: Any) -> None:
    _d, client, root, _out = env
    for path in ("peers/bob/../alice/MEMORY.md", f"{root}/peers/alice/../bob/MEMORY.md",
                 f"{root}/../outside/secret.md"):
        assert refused(client, "get", {"path": path}).code == BAD_TARGET
        assert refused(client, "get", {"path": path, "session": ALICE}).code == BAD_TARGET


def test_confined_get_still_reads_its_own_file_and_nothing_else(env: Any) -> None:
    _d, client, root, _out = env
    assert words_in(client.call("get", {"path": "peers/alice/MEMORY.md", "session": ALICE})) == {"alicequokka"}
    assert words_in(client.call("get", {"path": f"{root}/peers/alice/MEMORY.md", "session": ALICE})) == {"alicequokka"}
    for path in ("peers/bob/MEMORY.md", "MEMORY.md", f"{root}/user/preferences.md", "/etc/passwd", "peers/bob/none.md"):
        assert refused(client, "get", {"path": path, "session": ALICE}).code == DENIED, path


# -- 1b. symlinks and hard links between namespaces ---------------------------------------------


def test_symlinked_file_into_another_peer_is_refused_to_get_and_search(env: Any) -> None:
    _d, client, root, _out = env
    os.symlink("../bob/MEMORY.md", root / "peers/alice/x.md")
    os.symlink("../alice/MEMORY.md", root / "peers/bob/y.md")  # the other direction: spelt outside alice
    assert client.call("reindex", {"wait": True})["done"]
    for path in ("peers/alice/x.md", "peers/bob/y.md"):
        assert refused(client, "get", {"path": path, "session": ALICE}).code == DENIED
    err = refused(client, "get", {"path": "peers/alice/x.md", "session": ALICE})
    assert "link out of its namespace" in err.message and "bob" not in err.message  # the target stays unnamed
    assert search(client, ALICE, "word file bobwombat alicequokka") == {"alicequokka"}
    ctx = client.call("context", {"query": "the word of this file", "max_tokens": 400, "session": ALICE})
    assert words_in(ctx) == {"alicequokka"}
    assert "bobwombat" in search(client, None, "bobwombat")  # the owner sees everything, as before
    assert words_in(client.call("get", {"path": "peers/alice/x.md"})) == {"bobwombat"}


def test_symlinked_folder_into_another_peer_is_refused(env: Any) -> None:
    _d, client, root, _out = env
    os.symlink("../bob", root / "peers/alice/d")
    err = refused(client, "get", {"path": "peers/alice/d/MEMORY.md", "session": ALICE})
    assert err.code == DENIED and "bobwombat" not in err.message


def test_hard_link_across_peers_is_refused_to_confined_sessions(env: Any) -> None:
    _d, client, root, _out = env
    os.link(root / "peers/bob/MEMORY.md", root / "peers/alice/h.md")
    assert client.call("reindex", {"paths": ["peers/alice/h.md"], "wait": True})["done"]
    err = refused(client, "get", {"path": "peers/alice/h.md", "session": ALICE})
    assert err.code == DENIED and "hard links" in err.message
    assert "bobwombat" not in search(client, ALICE, "bobwombat")
    assert "bobwombat" in search(client, None, "bobwombat")


# -- 2. reindex outside the roots ---------------------------------------------------------


def test_reindex_never_indexes_outside_the_roots(env: Any) -> None:
    d, client, root, outside = env
    files_before = client.call("status")["files"]
    for paths, code in [(["../outside/secret.md"], BAD_TARGET),
                        (["peers/alice/../../../outside/secret.md"], BAD_TARGET), (["../.."], BAD_TARGET),
                        ([".."], BAD_TARGET), ([str(outside / "secret.md")], INVALID),
                        ([str(outside)], INVALID), (["/"], INVALID)]:
        err = refused(client, "reindex", {"paths": paths, "wait": True})
        assert err.code == code, (paths, err.message)
    os.symlink(outside, root / "ext")  # a folder link out of the root: neither walked nor read
    os.symlink(outside / "secret.md", root / "peers/alice/leak.md")
    for paths in (["ext"], ["ext/secret.md"], [str(root / "ext")], ["peers/alice/leak.md"]):
        err = refused(client, "reindex", {"paths": paths, "wait": True})
        assert err.code == INVALID and "not inside any memory root" in err.message, paths
    assert client.call("reindex", {"paths": ["peers"], "wait": True})["done"]  # the walk skips the file link out
    wait_for(lambda: ready(client), what="idle")
    assert OUTSIDE_WORD not in search(client, None, OUTSIDE_WORD)
    assert OUTSIDE_WORD not in search(client, ALICE, OUTSIDE_WORD)
    assert client.call("status")["files"] == files_before
    assert d.worker.last_error is None


def test_reindex_of_the_root_or_a_folder_stays_inside(env: Any) -> None:
    _d, client, root, _out = env
    (root / "peers/alice/new.md").write_text("- A fresh note about pelicans.\n")
    res = client.call("reindex", {"paths": [str(root), "."], "wait": True})
    assert res["done"] and "pelicans" in str(client.call("search", {"query": "pelicans", "mode": "keyword"}))


# -- 3. scope filters are exact and case-sensitive ------------------------------------------------


def test_peer_scope_is_case_sensitive_in_search_and_context(env: Any) -> None:
    _d, client, _root, _out = env
    query = "word file bobwombat bobcapsotter alicequokka"
    assert search(client, BOB, query) == {"bobwombat"}
    assert search(client, BOB_CAPS, query) == set()
    for session, expect in ((BOB, {"bobwombat"}), (BOB_CAPS, set())):
        ctx = client.call("context", {"query": "the word of this file", "max_tokens": 500, "session": session})
        assert words_in(ctx) == expect
    assert refused(client, "get", {"path": "peers/Bob/MEMORY.md", "session": BOB}).code == DENIED


def test_path_prefix_is_exact_and_checked(env: Any) -> None:
    _d, client, root, _out = env
    query = "word file bobwombat bobcapsotter"
    assert search(client, None, query, path_prefix="peers/bob/") == {"bobwombat"}
    assert search(client, None, query, path_prefix="PEERS/") == set()
    assert search(client, None, query, path_prefix="peers/_ob/") == set()  # '_' is no wildcard
    assert search(client, None, query, path_prefix="peers/%") == set()
    assert search(client, None, query, path_prefix=f"{root}/peers/Bob/") == {"bobcapsotter"}
    for prefix in ("peers/alice/../bob/", "peers/\x00", "a/" + "x" * 300):
        err = refused(client, "search", {"query": "x", "path_prefix": prefix, "session": ALICE})
        assert err.code == BAD_TARGET, prefix
    assert refused(client, "search", {"query": "x", "path_prefix": "peers/bob/", "session": ALICE}).code == DENIED


def test_default_namespace_excludes_are_exact(env: Any) -> None:
    _d, client, root, _out = env
    (root / "Peers").mkdir()
    (root / "Peers/notes.md").write_text("- Capital folder note about ibises.\n")
    assert client.call("reindex", {"paths": ["Peers/notes.md"], "wait": True})["done"]
    hits = client.call("search", {"query": "ibises", "mode": "keyword", "namespace": "default"})["hits"]
    assert [h["path"] for h in hits] == ["Peers/notes.md"]  # not the peers/ namespace folder


# -- 9. NUL bytes and over-long names ----------------------------------------------------------


LONG = "x" * 5000 + ".md"


@pytest.mark.parametrize(("method", "params"), [
    ("get", {"path": "a\x00.md"}), ("get", {"path": LONG}), ("get", {"path": f"peers/alice/{'y' * 300}.md"}),
    ("get", {"path": "peers/alice/\x00/../x.md", "session": ALICE}), ("get", {"path": "/\x00"}),
    ("reindex", {"paths": ["a\x00.md"], "wait": True}), ("reindex", {"paths": [LONG], "wait": True}),
    ("reindex", {"paths": ["/tmp/\x00"], "wait": True}), ("forget", {"path": "a\x00.md", "line": 1}),
    ("forget", {"path": LONG, "line": 1}), ("forget", {"path": "/x\x00/y.md", "line": 1}),
    ("search", {"query": "x", "path_prefix": "\x00"}),
    ("context", {"query": "x", "max_tokens": 50, "path_prefix": LONG}),
    ("get", {"path": "\ud800.md"}), ("reindex", {"paths": ["\udcff"], "wait": True}),
])
def test_nul_and_long_names_are_clear_errors_not_crashes(env: Any, method: str, params: dict[str, Any]) -> None:
    d, client, _root, _out = env
    err = refused(client, method, params)
    assert err.code == BAD_TARGET, err.message
    assert "\x00" not in err.message
    assert d.worker.last_error is None and client.call("status")["last_error"] is None


# -- writes: remember targets and forget ----------------------------------------------------------


def test_remember_never_writes_through_a_folder_link_or_a_hard_link(env: Any) -> None:
    _d, client, root, _out = env
    bob_before = (root / "peers/bob/MEMORY.md").read_text()
    os.symlink("bob", root / "peers/carol")
    os.link(root / "peers/bob/MEMORY.md", root / "peers/dave.md")  # a third name, outside any peer folder
    (root / "peers/dave").mkdir()
    os.link(root / "peers/bob/MEMORY.md", root / "peers/dave/MEMORY.md")
    for peer in ("carol", "dave"):
        err = refused(client, "remember", {"content": "We ship the mobile app in May every year.",
                                           "session": {"kind": "direct", "peer": peer}})
        assert err.code == BAD_TARGET and ("symlink" in err.message or "hard links" in err.message), err.message
    assert (root / "peers/bob/MEMORY.md").read_text() == bob_before


def test_forget_refuses_dotdot_and_links(env: Any) -> None:
    _d, client, root, _out = env
    bob_before = (root / "peers/bob/MEMORY.md").read_text()
    os.symlink("../bob/MEMORY.md", root / "peers/alice/x.md")
    for path in ("peers/alice/../bob/MEMORY.md", f"{root}/peers/alice/../bob/MEMORY.md", "peers/alice/x.md"):
        assert refused(client, "forget", {"path": path, "line": 3}).code == BAD_TARGET, path
    assert refused(client, "forget", {"path": "peers/alice/MEMORY.md", "line": 3, "session": ALICE}).code == DENIED
    assert (root / "peers/bob/MEMORY.md").read_text() == bob_before


def test_group_sessions_are_held_the_same_way(env: Any) -> None:
    _d, client, root, _out = env
    os.symlink("../../peers/bob/MEMORY.md", root / "groups/team/b.md")
    assert client.call("reindex", {"wait": True})["done"]
    assert refused(client, "get", {"path": "groups/team/../../peers/bob/MEMORY.md", "session": TEAM}).code == BAD_TARGET
    assert refused(client, "get", {"path": "groups/team/b.md", "session": TEAM}).code == DENIED
    assert search(client, TEAM, "word file teamheron bobwombat") == {"teamheron"}
    assert set(WORDS) >= {"groups/team/MEMORY.md"}


def test_cli_reindex_resolves_a_typed_dotdot_before_sending(env: Any, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from memoryd.daemon.client import cli

    d, _client, root, _out = env
    monkeypatch.chdir(root / "peers/alice")
    (root / "peers/bob/MEMORY.md").write_text("- Bob now likes capybaras.\n")
    assert cli.main(["reindex", "--socket", str(d.cfg.socket_path), "--wait", "--json", "../bob/MEMORY.md"]) == 0
    assert '"files": 1' in capsys.readouterr().out
