"""The memory files as MCP resources and the ``recall`` prompt: URIs and messages in-process; list, read and
get through the SDK's client (slow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.mcp_prompts import recall_message, recall_params
from memoryd.daemon.client.mcp_resources import ResourceError, cursor_offset, path_of, resource_of
from tests.client.test_mcp import run_session
from tests.helpers import running_daemon

FILES = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n",
         "memory/2026-01-02.md": "# 2026-01-02\n\n- Standup moved to 9:30.\n",
         "peers/alice/MEMORY.md": "- Alice likes the quokka mascot.\n",
         "peers/bob/MEMORY.md": "- Bob likes the quokka plushie.\n",
         "notes/with space #1.md": "- A file name that needs escaping.\n"}


def test_a_resource_uri_is_the_files_absolute_file_uri_and_maps_back() -> None:
    r = resource_of({"root": "/home/me/memory", "path": "notes/with space #1.md", "size": 12, "mtime": 0.0})
    assert r["uri"] == "file:///home/me/memory/notes/with%20space%20%231.md"
    assert (r["name"], r["mimeType"], r["size"]) == ("notes/with space #1.md", "text/markdown", 12)
    assert path_of(r["uri"]) == "/home/me/memory/notes/with space #1.md"
    assert path_of("file://localhost/m/MEMORY.md") == "/m/MEMORY.md"


def test_a_files_abstract_ends_its_description() -> None:
    entry = {"path": "MEMORY.md", "size": 12, "mtime": 0.0}
    assert resource_of(entry)["description"].endswith(")."), "no abstract: the description as before"
    about = resource_of({**entry, "abstract": "The user's editor and standup time."})["description"]
    assert about.startswith("Memory file (modified ") and about.endswith("). The user's editor and standup time.")


def test_resources_are_listed_without_abstracts_by_a_daemon_older_than_them() -> None:
    from memoryd.daemon.client.mcp_server import INVALID_PARAMS, DaemonBridge, DaemonRefusal

    b = DaemonBridge("/nonexistent/s.sock")
    asked: list[dict[str, Any]] = []

    def older(method: str, params: dict[str, Any]) -> Any:
        asked.append(params)
        if "abstracts" in params:
            raise DaemonRefusal("invalid arguments: unknown param 'abstracts'", INVALID_PARAMS)
        return {"files": [{"path": "MEMORY.md", "size": 1, "mtime": 0.0}], "next_offset": None}

    b._call = older  # type: ignore[method-assign]
    listed, nxt = b.list_resources(None)
    assert [r["name"] for r in listed] == ["MEMORY.md"] and nxt is None and len(asked) == 2


def test_a_resource_lists_its_files_abstract(tmp_path: Path, short_dir: Path) -> None:
    from memoryd.daemon.client.mcp_server import DaemonBridge
    from memoryd.indexer.llm.config import LLMConfig
    from memoryd.indexer.redaction import privacy
    from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
    from tests.fake_chat_server import FakeChatServer

    with FakeChatServer() as chat, running_daemon(tmp_path, short_dir / "m.sock", FILES, llm=LLMConfig(
            provider="openai", url=chat.url, model="fake-model", retries=0)) as (d, _client, _root):
        store = AbstractStore(d.cfg.data_dir / STORE_NAME)  # what the idle job would have made
        store.put("fake-model", privacy.redact(FILES["MEMORY.md"], d.cfg.write.redact_index), "The user's editor.")
        store.close()
        listed, _ = DaemonBridge(d.cfg.socket_path).list_resources(None)
        about = {r["name"]: r["description"] for r in listed}
        assert about["MEMORY.md"].endswith("). The user's editor.")
        assert about["memory/2026-01-02.md"].endswith(")."), "no abstract yet: none shown"


@pytest.mark.parametrize("uri", ["memoryd://MEMORY.md", "file://host/m.md", "https://x/m.md", "file:m.md",
                                 "file:///a%00b.md"])
def test_a_uri_that_names_no_local_file_is_refused(uri: str) -> None:
    with pytest.raises(ResourceError):
        path_of(uri)


def test_cursors_are_offsets() -> None:
    assert (cursor_offset(None), cursor_offset("200")) == (0, 200)
    for bad in ("-1", "x", "9" * 12):
        with pytest.raises(ResourceError, match="bad resources/list cursor"):
            cursor_offset(bad)


def test_recall_asks_for_the_topic_within_the_default_budget() -> None:
    assert recall_params({"topic": "  editor choice "}) == {"query": "editor choice", "max_tokens": 800}
    for bad in (None, {}, {"topic": "  "}, {"topic": "x" * 9000}):
        with pytest.raises(ValueError, match="recall: argument 'topic'"):
            recall_params(bad)
    assert recall_message("editor", "") == "memoryd has no stored memory relevant to: editor"
    assert recall_message("editor", "## Relevant memories\n").endswith("editor\n\n## Relevant memories\n")


@pytest.fixture
def running(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Path]]:
    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20) as (d, client, root):
        client.close()
        yield d, root


async def _browse(s: Any, root: Path, other: str) -> dict[str, Any]:
    from mcp.shared.exceptions import McpError

    listed = await s.list_resources()
    out: dict[str, Any] = {"listed": listed, "texts": {}, "errors": {}}
    for r in listed.resources:
        out["texts"][r.name] = (await s.read_resource(r.uri)).contents[0]
    for key, uri in {"other": (root / other).as_uri(), "outside": "file:///etc/passwd",
                     "scheme": "memoryd://MEMORY.md"}.items():
        try:
            await s.read_resource(uri)
        except McpError as exc:
            out["errors"][key] = str(exc)
    return out


@pytest.mark.slow
def test_owner_lists_and_reads_every_memory_file(running, tmp_path: Path) -> None:
    d, root = running
    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", lambda s: _browse(s, root, "nope.md"))
    names = {r.name for r in out["listed"].resources}
    assert names == set(FILES) and out["listed"].nextCursor is None
    for name, content in out["texts"].items():
        assert content.text == FILES[name] and content.mimeType == "text/markdown", name
    assert "not a file inside a memory root" in out["errors"]["outside"]
    assert "not a memoryd resource" in out["errors"]["scheme"]


@pytest.mark.slow
def test_a_direct_session_lists_and_reads_only_its_own_namespace(running, tmp_path: Path) -> None:
    d, root = running
    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", lambda s: _browse(s, root, "peers/bob/MEMORY.md"),
                      "--session", "direct", "--peer", "alice")
    assert [r.name for r in out["listed"].resources] == ["peers/alice/MEMORY.md"]
    assert out["texts"]["peers/alice/MEMORY.md"].text == FILES["peers/alice/MEMORY.md"]
    assert out["errors"]["other"].startswith("permission denied: a direct session may not read")
    assert "permission denied" in out["errors"]["outside"]


@pytest.mark.slow
def test_the_recall_prompt_brings_the_memories_about_a_topic(running, tmp_path: Path) -> None:
    from mcp.shared.exceptions import McpError

    d, _root = running

    async def body(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"prompts": (await s.list_prompts()).prompts,
                               "got": await s.get_prompt("recall", {"topic": "standup time"}), "errors": {}}
        for key, name, args in [("blank", "recall", {"topic": " "}), ("unknown", "forget", {})]:
            try:
                await s.get_prompt(name, args)
            except McpError as exc:
                out["errors"][key] = str(exc)
        return out

    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", body)
    (prompt,) = out["prompts"]
    assert prompt.name == "recall" and [(a.name, a.required) for a in prompt.arguments] == [("topic", True)]
    (message,) = out["got"].messages
    assert message.role == "user" and "Standup moved to 9:30" in message.content.text
    assert "memory/2026-01-02.md:" in message.content.text
    assert "argument 'topic' is required" in out["errors"]["blank"]
    assert "unknown prompt 'forget'; the prompts are recall" in out["errors"]["unknown"]
