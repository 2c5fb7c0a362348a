"""``remember``/``forget``/``audit`` end to end over a real socket (in-process daemon, hash embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED, CONTENT_TOO_LARGE, ENTRY_NOT_FOUND, MINUTE_LIMIT, TURN_LIMIT
from tests.write_fixtures import WriteDaemon

# watchdog warns "Callback with id ... already exists" when memoryd creates nested folders (peers/ID/)
# faster than its inotify thread adds watches; harmless, but filterwarnings=error would kill that thread
# (same as tests/daemon/test_watcher.py).
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

SECRET = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1"


def search_texts(w: WriteDaemon, query: str, mode: str = "keyword") -> list[str]:
    return [h["text"] for h in w.client.call("search", {"query": query, "mode": mode, "k": 20})["hits"]]


def test_remember_appears_in_search_then_reinforces_then_replaces(wd: WriteDaemon) -> None:
    first = wd.client.call("remember", {"content": "The user prefers Vim as their editor."})
    assert first["decision"] == "appended" and first["path"] == "user/preferences.md" and first["type"] == "preference"
    f = wd.root / first["path"]
    line = "- The user prefers Vim as their editor. <!-- memoryd: importance=4 -->"
    assert f.read_text().splitlines()[first["line"] - 1] == line
    assert any("prefers Vim" in t for t in search_texts(wd, "Vim editor"))  # re-indexed before returning

    again = wd.client.call("remember", {"content": "the user prefers Vim as their editor"})
    assert again["decision"] == "reinforced" and again["line"] == first["line"]  # counted in the entry's marker
    assert again["reinforcement"] == 1 and f.read_text().count("prefers Vim") == 1
    hit = wd.client.call("search", {"query": "Vim editor", "mode": "keyword"})["hits"][0]
    assert (hit["importance"], hit["reinforcements"]) == (4, 1) and hit["score"] > 0

    update = wd.client.call("remember", {"content": "The user prefers Neovim as their editor."})
    assert update["decision"] == "replaced", update
    assert update["previous"] == "The user prefers Vim as their editor."
    text = f.read_text()
    assert "prefers Neovim" in text and "prefers Vim" not in text
    assert any("Neovim" in t for t in search_texts(wd, "Neovim"))
    assert not any("prefers Vim " in t for t in search_texts(wd, "Vim"))


def test_a_secret_is_rejected_and_never_reaches_file_index_or_logs(wd: WriteDaemon) -> None:
    before = {p: p.read_bytes() for p in wd.root.rglob("*.md")}
    with capture_logs() as logs:
        res = wd.client.call("remember", {"content": f"The OpenAI key for the team bot is {SECRET} now."})
    assert res == {"decision": "rejected", "reason": "contains an API key (sk-…)", "rule": "api_key",
                   "stage": "privacy"}
    assert {p: p.read_bytes() for p in wd.root.rglob("*.md")} == before
    assert SECRET not in json.dumps(logs, default=str)
    assert any(e["event"] == "write.rejected" and "[REDACTED:api_key]" in e["preview"] for e in logs)
    assert all(SECRET not in t for t in search_texts(wd, "OpenAI key team bot", "hybrid"))
    wd.d.index.save(force=True)
    for f in wd.d.cfg.data_dir.rglob("*"):  # index, WAL, vectors, audit log: not one byte of it
        assert not f.is_file() or SECRET.encode() not in f.read_bytes(), f
    assert '"rule":"api_key"' in (wd.d.cfg.data_dir / "audit.jsonl").read_text()


def test_gate_rejections_in_both_languages_write_nothing(wd: WriteDaemon) -> None:
    for content, rule in [("OK", "too_short"), ("好的，我来帮你看看这个问题吧", "filler"),
                          ("Maybe the user likes cats more than dogs", "speculative"),
                          ("import os.path as osp, sys, re", "code")]:
        res = wd.client.call("remember", {"content": content})
        assert (res["decision"], res["rule"]) == ("rejected", rule)
    assert not (wd.root / "user").exists() and not (wd.root / "agent").exists()


def test_chinese_memory_goes_to_its_file_with_cjk_intact(wd: WriteDaemon) -> None:
    res = wd.client.call("remember", {"content": "团队决定采用 Redis 存储会话数据。"})
    assert res["decision"] == "appended" and res["path"] == "agent/decisions.md"
    assert (wd.root / res["path"]).read_text(encoding="utf-8").endswith(
        "- 团队决定采用 Redis 存储会话数据。 <!-- memoryd: importance=5 -->\n")
    assert any("Redis" in t for t in search_texts(wd, "Redis 会话"))


def test_limits_answer_errors_naming_the_limit(wd: WriteDaemon) -> None:
    big = "The user prefers long notes. " * 80
    with pytest.raises(RpcClientError) as e:
        wd.client.call("remember", {"content": big})
    assert e.value.code == CONTENT_TOO_LARGE and "write.max_content_bytes" in e.value.message
    session = {"kind": "direct", "peer": "alice", "turn": "t1"}
    for i in range(3):
        wd.client.call("remember", {"content": f"Alice prefers meeting number {i} in the morning.",
                                    "session": session})
    with pytest.raises(RpcClientError) as e:
        wd.client.call("remember", {"content": "Alice prefers tea over coffee always.", "session": session})
    assert e.value.code == TURN_LIMIT and e.value.data["limit"] == "write.max_per_turn"
    assert "tea" not in (wd.root / "peers" / "alice" / "MEMORY.md").read_text()
    # An owner agent's minute budget (10) is its own, and counts writes only: 3 refused by the gate don't count.
    for i in range(3):
        assert wd.client.call("remember", {"content": f"Ticket extra {i} ok",
                                           "session": {"kind": "owner", "turn": f"r{i}"}})["decision"] == "rejected"
    for i in range(10):
        wd.client.call("remember", {"content": f"Ticket {i} was closed by the release team.",
                                    "session": {"kind": "owner", "turn": f"o{i}"}})
    with pytest.raises(RpcClientError) as e:
        wd.client.call("remember", {"content": "Ticket 98 was closed by the release team.",
                                    "session": {"kind": "owner", "turn": "o99"}})
    assert e.value.code == MINUTE_LIMIT and e.value.data["limit"] == "write.max_per_minute"
    assert e.value.data["retry_after_s"] > 0 and "retry in" in e.value.message
    # The person at the command line (no session, no turn) is not an agent: not limited.
    person = wd.client.call("remember", {"content": "Ticket 99 was closed by the release team."})
    assert person["decision"] != "rejected"
    assert wd.client.call("search", {"query": "Ticket", "mode": "keyword"})["hits"]  # reads unaffected


def test_sessions_are_confined_to_their_namespace(wd: WriteDaemon) -> None:
    peer = {"kind": "direct", "peer": "bob"}
    res = wd.client.call("remember", {"content": "Bob prefers async updates over meetings.", "session": peer})
    assert res["path"] == "peers/bob/MEMORY.md" and res["namespace"] == "peer:bob"
    assert "## Preferences" in (wd.root / res["path"]).read_text()
    for params in [{"namespace": "peer:carol"}, {"namespace": "default"}, {"namespace": "group:g1"}]:
        with pytest.raises(RpcClientError) as e:
            wd.client.call("remember", {"content": "Bob prefers async updates over meetings.", "session": peer,
                                        **params})
        assert e.value.code == ACCESS_DENIED
    with pytest.raises(RpcClientError) as e:
        wd.client.call("forget", {"path": res["path"], "line": res["line"], "session": peer})
    assert e.value.code == ACCESS_DENIED
    with pytest.raises(RpcClientError) as e:
        wd.client.call("audit", {"session": {"kind": "group", "group": "g1"}})
    assert e.value.code == ACCESS_DENIED


def test_forget_removes_one_entry_and_audit_lists_everything(wd: WriteDaemon) -> None:
    a = wd.client.call("remember", {"content": "Always run the linters before pushing a branch."})
    wd.client.call("remember", {"content": "Never force-push to the main branch of any repo."})
    with pytest.raises(RpcClientError) as e:
        wd.client.call("forget", {"path": a["path"], "line": a["line"] + 100})
    assert e.value.code == ENTRY_NOT_FOUND
    gone = wd.client.call("forget", {"path": a["path"], "line": a["line"]})
    assert gone["decision"] == "removed" and gone["previous"] == "Always run the linters before pushing a branch."
    text = (wd.root / a["path"]).read_text()
    assert "linters" not in text and "force-push" in text
    assert not any("linters" in t for t in search_texts(wd, "linters"))
    entries = wd.client.call("audit", {"tail": 10})["entries"]
    assert [(x["action"], x["decision"]) for x in entries] == [
        ("remember", "appended"), ("remember", "appended"), ("forget", "denied"), ("forget", "removed")]
    assert entries[0]["session"] == {"kind": "owner"} and entries[0]["bytes"] == 47
    assert all("content" not in x for x in entries)


def test_unknown_type_and_bad_namespace_are_param_errors(wd: WriteDaemon, tmp_path: Path) -> None:
    with pytest.raises(RpcClientError) as e:
        wd.client.call("remember", {"content": "The user prefers Vim as their editor.", "type": "gossip"})
    assert e.value.code == -32602 and "type" in e.value.message
    with pytest.raises(RpcClientError) as e:
        wd.client.call("remember", {"content": "The user prefers Vim as their editor.", "namespace": "peer:../x"})
    assert e.value.code == -32024
    res = wd.client.call("remember", {"content": "The user prefers Vim as their editor.", "type": "journal"})
    assert res["path"].startswith("memory/") and res["type"] == "journal"
