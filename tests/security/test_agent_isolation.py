"""Agent isolation (issue #40, item 7): two agents on one daemon cannot reach each other's memory.

An ``agent`` session is confined to ``agents/ID`` of the first root: it searches, gets, lists,
builds context from and remembers into that folder only, never another agent's nor the owner's
files, and no answer or refusal it gets names an absolute path (docs/security.md, "Agent isolation").
Each file holds one unique word, so a read that reaches it is easy to detect.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.mcp_resources import path_of, resource_of
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.indexer.access import AGENT, Session, parse_binding, parse_session
from memoryd.indexer.errors import SessionError
from tests.helpers import running_daemon, wait_for

WORDS = {
    "MEMORY.md": "ownerzebra",
    "user/private.md": "ownerprivate",
    "agents/alpha/notes.md": "alphaquokka",
    "agents/beta/notes.md": "betawombat",
    "agents/alphabet/notes.md": "alphabetheron",  # a look-alike prefix of alpha's folder
}
ALPHA = {"kind": "agent", "agent": "alpha"}
BETA = {"kind": "agent", "agent": "beta"}
DENIED, INTERNAL = -32020, -32603


@pytest.fixture
def env(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Path]]:
    files = {rel: f"# Notes\n\n- The word of this file is {word}.\n" for rel, word in WORDS.items()}
    with running_daemon(tmp_path, short_dir / "m.sock", files) as (_d, client, root):
        yield client, root


def words(result: Any) -> set[str]:
    text = json.dumps(result)
    return {w for w in WORDS.values() if w in text}


def no_absolute(result: Any, root: Path) -> None:
    text = json.dumps(result)
    assert str(root) not in text and str(root.resolve()) not in text and '"root"' not in text, text[:500]


def refused(client: Any, method: str, params: dict[str, Any]) -> RpcClientError:
    with pytest.raises(RpcClientError) as err:
        client.call(method, params)
    assert err.value.code != INTERNAL, err.value.message
    return err.value


def test_the_agent_session_parses_and_binds() -> None:
    assert parse_session(ALPHA, owner_allowed=False) == Session(AGENT, agent="alpha")
    assert parse_binding("agent:alpha") == Session(AGENT, agent="alpha")
    assert Session(AGENT, agent="alpha").key == "agent:alpha"
    for bad in ({"kind": "agent"}, {"kind": "agent", "agent": "../beta"}, {"kind": "agent", "agent": "a", "peer": "b"},
                {"kind": "owner", "agent": "alpha"}):
        with pytest.raises(SessionError):
            parse_session(bad, owner_allowed=True)


def test_search_and_context_see_only_the_agents_own_folder(env: Any) -> None:
    client, root = env
    query = " ".join(WORDS.values())
    for session, mine in ((ALPHA, "alphaquokka"), (BETA, "betawombat")):
        found = client.call("search", {"query": query, "mode": "keyword", "k": 50, "session": session})
        assert words(found) == {mine}
        no_absolute(found, root)
        block = client.call("context", {"query": "the word of this file", "mode": "keyword", "max_tokens": 400,
                                        "session": session})
        assert words(block) == {mine} and block["sources"], block
        no_absolute(block, root)
    # the owner still sees everything, with its roots
    owner = client.call("search", {"query": query, "mode": "keyword", "k": 50})
    assert words(owner) == set(WORDS.values()) and owner["hits"][0]["root"] == str(root)


def test_a_path_prefix_or_namespace_cannot_widen_an_agents_reads(env: Any) -> None:
    client, root = env
    for extra in ({"path_prefix": "agents/beta/"}, {"path_prefix": f"{root}/"}, {"path_prefix": "user/"},
                  {"namespace": "agent:beta"}, {"namespace": "default"}):
        try:
            found = client.call("search", {"query": "betawombat ownerprivate ownerzebra", "mode": "keyword",
                                           "session": ALPHA, **extra})
        except RpcClientError as exc:
            assert exc.code == DENIED and str(root) not in exc.message, exc.message
            continue
        assert words(found) == set(), extra
        no_absolute(found, root)


def test_get_of_another_agents_or_the_owners_file_is_refused_without_a_path(env: Any) -> None:
    client, root = env
    mine = client.call("get", {"path": "agents/alpha/notes.md", "session": ALPHA})
    assert words(mine) == {"alphaquokka"}
    no_absolute(mine, root)
    for path in ("agents/beta/notes.md", "user/private.md", "MEMORY.md", "agents/alphabet/notes.md",
                 f"{root}/agents/beta/notes.md", "agents/beta/missing.md"):
        err = refused(client, "get", {"path": path, "session": ALPHA})
        assert err.code == DENIED, (path, err.message)
        assert str(root) not in err.message and str(root) not in json.dumps(err.data), err.message


def test_files_lists_only_the_agents_folder_with_no_root(env: Any) -> None:
    client, root = env
    listed = client.call("files", {"session": ALPHA})
    assert [f["path"] for f in listed["files"]] == ["agents/alpha/notes.md"]
    no_absolute(listed, root)
    # the MCP resource of such an entry reads back by its relative path
    res = resource_of(listed["files"][0])
    assert res["uri"] == "memoryd:///agents/alpha/notes.md" and path_of(res["uri"]) == "agents/alpha/notes.md"
    assert words(client.call("list", {"session": ALPHA})) == {"alphaquokka"}
    assert words(client.call("files", {"session": BETA})) == set()  # paths only: no words in file names


def test_an_agents_file_abstracts_name_no_absolute_path(tmp_path: Path, short_dir: Path) -> None:
    """The abstract fields of get and files pass the same scrubbing: an abstract that quotes where the
    file lies (a model may well repeat a path it read) reaches the agent relative, the owner as written."""
    from memoryd.indexer.llm.config import LLMConfig
    from memoryd.indexer.redaction import privacy
    from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
    from tests.fake_chat_server import FakeChatServer

    files = {rel: f"# Notes\n\n- The word of this file is {word}.\n" for rel, word in WORDS.items()}
    with FakeChatServer() as chat, running_daemon(
            tmp_path, short_dir / "m.sock", files,
            llm=LLMConfig(provider="openai", url=chat.url, model="fake-model", retries=0)) as (d, client, root):
        store = AbstractStore(d.cfg.data_dir / STORE_NAME)  # what the idle job would have made
        store.put("fake-model", privacy.redact(files["agents/alpha/notes.md"], d.cfg.write.redact_index),
                  f"Alpha's word, kept in {root}/agents/alpha/notes.md under {root}.")
        store.close()
        got = client.call("get", {"path": "agents/alpha/notes.md", "abstract": True, "session": ALPHA})
        assert got["abstract"] == "Alpha's word, kept in agents/alpha/notes.md under <memory root>."
        no_absolute(got, root)
        listed = client.call("files", {"abstracts": True, "session": ALPHA})
        assert [f["abstract"] for f in listed["files"]] == [got["abstract"]] and listed["abstracts"] == "on"
        no_absolute(listed, root)
        owner = client.call("get", {"path": "agents/alpha/notes.md", "abstract": True})
        assert f"{root}/agents/alpha/notes.md" in owner["abstract"]


def test_remember_lands_in_the_agents_folder_and_nowhere_else(env: Any) -> None:
    client, root = env
    out = client.call("remember", {"content": "The alpha agent deploys with the blue pipeline on Fridays.",
                                   "session": ALPHA})
    assert out["decision"] == "appended" and out["path"].startswith("agents/alpha/"), out
    no_absolute(out, root)
    for namespace in ("agent:beta", "default", "peer:alpha", "group:alpha"):
        err = refused(client, "remember", {"content": "The alpha agent writes into someone else's notes now.",
                                           "namespace": namespace, "session": ALPHA})
        assert err.code == DENIED and str(root) not in err.message, err.message
    assert not (root / "agents" / "beta" / "notes.md").read_text().count("alpha agent")
    wait_for(lambda: client.call("status")["pending"] == 0, what="the write indexed")
    beta_sees = client.call("search", {"query": "blue pipeline Fridays", "mode": "keyword", "session": BETA})
    assert beta_sees["hits"] == []


def test_forget_is_confined_to_the_agents_own_lines(env: Any) -> None:
    client, root = env
    err = refused(client, "forget", {"path": "agents/beta/notes.md", "line": 3, "session": ALPHA})
    assert err.code == DENIED and str(root) not in err.message
    assert "betawombat" in (root / "agents" / "beta" / "notes.md").read_text()
    err = refused(client, "forget", {"path": f"{root}/user/private.md", "line": 3, "session": ALPHA})
    assert str(root) not in err.message, err.message


def test_owner_only_methods_are_refused_to_an_agent(env: Any) -> None:
    client, root = env
    for method in ("history", "audit"):
        err = refused(client, method, {"session": ALPHA})
        assert err.code == DENIED and str(root) not in err.message


def test_a_uid_bound_to_an_agent_is_that_agent_and_cannot_pick_another() -> None:
    from memoryd.daemon.api.session import bind_uids
    from memoryd.daemon.rpc.errors import RpcError
    from memoryd.daemon.rpc.jsonrpc import Peer

    seen: list[Any] = []
    gated = bind_uids({"search": lambda params, peer: seen.append(params["session"])},
                      {4242: parse_binding("agent:alpha")}, owner_uid=1000)
    gated["search"]({"query": "x"}, Peer(1, 4242, 4242))
    gated["search"]({"query": "x", "session": {**ALPHA, "turn": "t1"}}, Peer(1, 4242, 4242))
    assert seen == [ALPHA, {**ALPHA, "turn": "t1"}]
    for other in (BETA, {"kind": "owner"}, {"kind": "direct", "peer": "alpha"}):
        with pytest.raises(RpcError) as err:
            gated["search"]({"query": "x", "session": other}, Peer(1, 4242, 4242))
        assert err.value.code == DENIED


def test_memoryd_mcp_takes_an_agent_session() -> None:
    import argparse

    from memoryd.daemon.client.cli_mcp import session_of

    def ns(**kw: Any) -> argparse.Namespace:
        return argparse.Namespace(**{"session": "owner", "peer": None, "group": None, "agent": None, **kw})

    assert session_of(ns(session="agent", agent="alpha")) == ALPHA
    for bad in (ns(session="agent"), ns(session="agent", agent="alpha", peer="bob"), ns(agent="alpha"),
                ns(session="agent", agent="../beta")):
        with pytest.raises(ValueError):
            session_of(bad)
