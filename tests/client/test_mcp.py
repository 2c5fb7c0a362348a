"""``memoryd mcp``: tool schemas and argument checks in-process; real MCP sessions with the SDK's client.

The slow tests run an in-process daemon (hash embedder, real socket) and spawn
``memoryd mcp`` as the MCP host would, talking to it with the SDK's own
``stdio_client`` + ``ClientSession``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memoryd.daemon.app import Daemon
from memoryd.daemon.client import cli, cli_mcp
from memoryd.daemon.client.mcp_server import DaemonBridge
from memoryd.daemon.client.mcp_tools import BY_NAME, TOOLS, ToolError, check_arguments
from memoryd.indexer.config import Config
from tests.helpers import running_daemon

REPO = Path(__file__).resolve().parents[2]
NAMES = {"memory_search", "memory_get", "memory_context", "memory_remember", "memory_status", "memory_list",
         "memory_update_section", "memory_promote", "memory_bank_propose", "memory_observe"}
ZEBRA = "- The zebracorn migration plan moves every service to the new queue by March.\n"
MAX_PER_MINUTE = 2


# -- in-process: schemas, argument checks, the bridge --------------------------------


def test_tools_have_closed_valid_schemas_with_described_arguments() -> None:
    assert {t.name for t in TOOLS} == NAMES
    for t in TOOLS:
        Draft202012Validator.check_schema(t.schema)
        assert t.schema["type"] == "object" and t.schema["additionalProperties"] is False
        assert len(t.description) > 120, t.name
        for name, prop in t.schema["properties"].items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    assert BY_NAME["memory_search"].schema["required"] == ["query"]
    assert BY_NAME["memory_context"].schema["required"] == ["query"]
    assert [t.name for t in TOOLS if not t.read_only] == ["memory_remember", "memory_update_section",
                                                          "memory_promote", "memory_observe"]
    # remember can replace an entry and update_section replaces a section's text; promote only adds a copy;
    # observe's retention deletes whole old session notes
    assert [t.name for t in TOOLS if t.destructive] == ["memory_remember", "memory_update_section", "memory_observe"]
    assert [t.name for t in TOOLS if not t.idempotent] == ["memory_remember", "memory_promote"]


def test_every_optional_argument_has_a_default_or_says_what_omitting_it_means() -> None:
    for t in TOOLS:
        for name, prop in t.schema["properties"].items():
            if name not in t.schema["required"]:
                assert "default" in prop or "Omit" in prop["description"], f"{t.name}.{name}"
                if "default" in prop:
                    Draft202012Validator(prop).validate(prop["default"])
    assert BY_NAME["memory_context"].schema["properties"]["max_tokens"]["default"] == 800


def test_output_schemas_are_valid_objects_that_type_every_field() -> None:
    for t in TOOLS:
        Draft202012Validator.check_schema(t.output)
        assert t.output["type"] == "object" and t.output.get("additionalProperties", True) is True, t.name
        assert t.output["required"] and set(t.output["required"]) <= set(t.output["properties"]), t.name
        for name, prop in t.output["properties"].items():
            assert "type" in prop, f"{t.name} -> {name}"


@pytest.mark.parametrize(("tool", "args", "expect"), [
    ("memory_search", {}, "'query' is required"),
    ("memory_search", {"query": "x", "k": 0}, "'k': 0 is less than the minimum of 1"),
    ("memory_search", {"query": "x", "mode": "fuzzy"}, "'mode': 'fuzzy' is not one of"),
    ("memory_search", {"query": "x", "kk": 3},
     "('kk' was unexpected) (arguments: query, k, namespace, mode, min_score, path_prefix, sites)"),
    ("memory_search", {"query": "x", "min_score": 1.5}, "'min_score': 1.5 is greater than the maximum of 1"),
    ("memory_context", {"query": "x", "path_prefix": ""}, "'path_prefix': '' should be non-empty"),
    ("memory_search", {"query": "   "}, "'query' must not be blank"),
    ("memory_search", {"query": "x", "namespace": "peers/alice"}, "'namespace': 'peers/alice' does not match"),
    ("memory_get", {"path": "a.md", "from": "3"}, "'from': '3' is not of type 'integer'"),
    ("memory_context", {"query": "x", "max_tokens": 8}, "'max_tokens': 8 is less than the minimum of 16"),
    ("memory_remember", {"content": "x", "type": "fact"}, "'type': 'fact' is not one of"),
    ("memory_status", {"verbose": True}, "('verbose' was unexpected)"),
    ("memory_observe", {}, "'transcript' is required"),
    ("memory_observe", {"transcript": "user: hi", "format": "jsonl"}, "'format': 'jsonl' is not one of"),
    ("memory_observe", {"transcript": "user: hi", "session_id": " "}, "'session_id' must not be blank"),
    ("memory_observe", {"transcript": "user: hi", "wait": True}, "('wait' was unexpected)"),
])
def test_bad_arguments_are_refused_naming_the_argument(tool: str, args: dict[str, Any], expect: str) -> None:
    with pytest.raises(ToolError) as err:
        check_arguments(BY_NAME[tool], args)
    assert str(err.value).startswith(f"{tool}: invalid arguments: ") and expect in str(err.value)


def test_bridge_maps_tool_arguments_to_daemon_params() -> None:
    direct = {"kind": "direct", "peer": "alice"}
    b = DaemonBridge("/nonexistent/s.sock", direct)
    assert b.request("memory_search", {"query": "q", "namespace": "peer:alice"}) == (
        "search", {"query": "q", "min_score": "default", "namespace": "peer:alice", "session": direct})
    assert b.request("memory_search", {"query": "q", "k": 3, "mode": "keyword"})[1] == {
        "query": "q", "min_score": "default", "k": 3, "mode": "keyword", "session": direct}
    assert b.request("memory_search", {"query": "q", "min_score": 0.2})[1]["min_score"] == 0.2
    assert b.request("memory_context", {"query": "q", "max_tokens": 300, "min_score": 0})[1]["min_score"] == 0
    assert b.request("memory_get", {"path": "a.md", "from": 3, "lines": 2}) == (
        "get", {"path": "a.md", "start_line": 3, "end_line": 4, "session": direct})
    assert b.request("memory_get", {"path": "a.md"})[1] == {"path": "a.md", "start_line": 1, "session": direct}
    assert b.request("memory_search", {"query": "q", "min_score": 0.4, "path_prefix": "memory/"})[1] == {
        "query": "q", "min_score": 0.4, "path_prefix": "memory/", "session": direct}
    assert b.request("memory_context", {"query": "q", "max_tokens": 300}) == (
        "context", {"query": "q", "max_tokens": 300, "session": direct})
    assert b.request("memory_context", {"query": "q"})[1] == {"query": "q", "max_tokens": 800, "session": direct}
    assert b.request("memory_context", {"query": "q", "min_score": 0, "path_prefix": "/m/"})[1] == {
        "query": "q", "max_tokens": 800, "min_score": 0, "path_prefix": "/m/", "session": direct}
    assert b.request("memory_remember", {"content": "c", "type": "decision"}) == (
        "remember", {"content": "c", "type": "decision", "session": direct})
    assert b.request("memory_status", {}) == ("status", {})
    assert b.request("memory_observe", {"transcript": "user: hi", "session_id": "s1", "final": True}) == (
        "observe", {"session_id": "s1", "transcript": "user: hi", "final": True, "session": direct})
    # no session id: this connection's, the same on every call (one host session, one conversation)
    first, again = (b.request("memory_observe", {"transcript": t})[1]["session_id"] for t in ("a", "b"))
    assert first == again == b.connection_id and first.startswith("mcp-")


def test_observe_is_not_one_of_the_turns_memory_writes() -> None:
    """Handing the conversation over after each reply must neither use up nor prolong the write turn."""
    b = DaemonBridge("/nonexistent/s.sock")
    sent: list[tuple[str, dict[str, Any]]] = []
    b._call = lambda method, params: sent.append((method, params)) or {}  # type: ignore[method-assign]
    b.call_tool("memory_observe", {"transcript": "user: I prefer tea\nassistant: Noted."})
    b.call_tool("memory_remember", {"content": "The user prefers tea."})
    assert "turn" not in sent[0][1]["session"] and sent[1][1]["session"]["turn"].startswith("mcp-")


def test_bridge_without_daemon_names_the_socket_and_the_fix(short_dir: Path) -> None:
    b = DaemonBridge(short_dir / "none.sock")
    with pytest.raises(ToolError) as err:
        b.call_tool("memory_search", {"query": "anything"})
    msg = str(err.value)
    assert str(short_dir / "none.sock") in msg and "memoryd run" in msg and "--socket" in msg
    with pytest.raises(ToolError, match="unknown tool 'memory_delete'; the tools are memory_search"):
        b.call_tool("memory_delete", {})


@pytest.mark.parametrize(("flags", "session"), [
    ([], {"kind": "owner"}),
    (["--session", "direct", "--peer", "alice"], {"kind": "direct", "peer": "alice"}),
    (["--session", "group", "--group", "team-1"], {"kind": "group", "group": "team-1"}),
])
def test_session_flags(flags: list[str], session: dict[str, str]) -> None:
    assert cli_mcp.session_of(parse_mcp_flags(flags)) == session


@pytest.mark.parametrize(("flags", "expect"), [
    (["--peer", "alice"], "need --session direct"),
    (["--session", "direct"], "needs --peer ID"),
    (["--session", "group", "--group", "g", "--peer", "p"], "needs --group ID (and no --peer)"),
    (["--session", "direct", "--peer", "../etc"], "an id is 1-64 letters"),
])
def test_bad_session_flags_are_usage_errors(flags: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_mcp.main(flags) == cli_mcp.EXIT_USAGE
    assert expect in capsys.readouterr().err


def test_memoryd_cli_wires_the_mcp_command() -> None:
    args = cli.build_parser().parse_args(["mcp", "--socket", "/tmp/x.sock", "--session", "direct", "--peer", "a"])
    assert cli._COMMANDS[args.command] is cli_mcp.cmd_mcp and cli_mcp.session_of(args)["peer"] == "a"


def parse_mcp_flags(flags: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli_mcp.add_parsers(p.add_subparsers(dest="command"))
    return p.parse_args(["mcp", *flags])


# -- real MCP sessions over stdio ------------------------------------------------------


def server_command() -> list[str]:
    """``memoryd mcp`` through the real CLI once it is wired, else the module's own entry point."""
    if "mcp" in cli._COMMANDS:
        return [sys.executable, "-m", "memoryd.daemon.cli", "mcp"]
    return [sys.executable, "-m", "memoryd.daemon.client.cli_mcp"]


def run_session(sock: Path, errlog: Path, body: Callable[[Any], Awaitable[Any]], *flags: str) -> Any:
    """Spawn ``memoryd mcp --socket sock [flags]`` and run ``body(ClientSession)`` after ``initialize``."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    cmd = server_command()
    env = {"XDG_CONFIG_HOME": "/nonexistent-memoryd-test"}  # the SDK adds PATH, HOME and the like
    if os.environ.get("PYTHONPATH"):  # the server must import what the test imports
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "--socket", str(sock), *flags], cwd=str(REPO),
                                   env=env)

    async def main() -> Any:
        with open(errlog, "a") as err:
            async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
                await asyncio.wait_for(s.initialize(), 60)
                return await body(s)

    return asyncio.run(main())


def text_of(res: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in res.content)


@pytest.fixture
def running(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Path]]:
    files = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n",
             "memory/2026-01-02.md": f"# 2026-01-02\n\n{ZEBRA}",
             "peers/alice/MEMORY.md": "- Alice likes the quokka mascot.\n",
             "peers/bob/MEMORY.md": "- Bob likes the quokka plushie.\n"}

    def limits(cfg: Config) -> Config:  # the minute limit first
        return replace(cfg, write=replace(cfg.write, max_per_minute=MAX_PER_MINUTE, max_per_turn=10))

    with running_daemon(tmp_path, short_dir / "m.sock", files, timeout=20, tweak=limits) as (d, client, root):
        client.close()  # the tests talk through the MCP bridge
        yield d, root


@pytest.mark.slow
def test_owner_session_lists_tools_and_answers_every_call(running, tmp_path: Path) -> None:
    d, root = running

    async def body(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name: t for t in (await s.list_tools()).tools}}
        for key, name, args in [
            ("search", "memory_search", {"query": "zebracorn migration plan", "k": 3, "mode": "keyword"}),
            ("get", "memory_get", {"path": "memory/2026-01-02.md", "from": 3, "lines": 1}),
            ("context", "memory_context", {"query": "zebracorn migration", "max_tokens": 200}),
            ("context_default", "memory_context", {"query": "zebracorn migration"}),
            ("prefixed", "memory_search", {"query": "zebracorn Neovim", "mode": "keyword", "path_prefix": "memory/",
                                           "min_score": 0}),
            ("status", "memory_status", {}),
            ("remember", "memory_remember", {"content": "We decided to deploy the billing service on Fridays "
                                                        "because traffic is lowest then.", "type": "decision"}),
            ("question", "memory_remember", {"content": "what time is it?"}),
            ("after", "memory_search", {"query": "billing deploy Fridays", "mode": "keyword"}),
            ("bad", "memory_search", {}),
            ("outside", "memory_get", {"path": "/etc/passwd"}),
            ("third", "memory_remember", {"content": "The staging database is called petunia-staging."}),
            ("limited", "memory_remember", {"content": "The on-call rotation changes every Monday at 9."}),
        ]:
            out[key] = await s.call_tool(name, args)
        return out

    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", body)
    tools = out["tools"]
    assert set(tools) == NAMES and tools["memory_search"].inputSchema["required"] == ["query"]
    assert tools["memory_search"].annotations.readOnlyHint and not tools["memory_remember"].annotations.readOnlyHint
    assert tools["memory_list"].annotations.readOnlyHint and tools["memory_update_section"].annotations.destructiveHint
    promote = tools["memory_promote"].annotations
    assert not promote.readOnlyHint and not promote.destructiveHint
    assert tools["memory_remember"].annotations.destructiveHint and not tools["memory_get"].annotations.destructiveHint
    for key, res in out.items():  # every answer fits its tool's outputSchema (the SDK client checks too)
        if key != "tools" and not res.isError:
            name = {"after": "memory_search", "question": "memory_remember", "third": "memory_remember",
                    "context_default": "memory_context", "prefixed": "memory_search"}.get(key, f"memory_{key}")
            Draft202012Validator(tools[name].outputSchema).validate(res.structuredContent)
    assert out["context_default"].structuredContent["maxTokens"] == 800
    assert {r["path"] for r in out["prefixed"].structuredContent["results"]} == {"memory/2026-01-02.md"}
    search = out["search"]
    assert not search.isError
    hit = search.structuredContent["results"][0]
    assert hit["citation"] == "memory/2026-01-02.md:1-3" and "zebracorn" in hit["snippet"] and hit["score"] > 0
    assert json.loads(text_of(search)) == search.structuredContent
    assert out["get"].structuredContent["text"] == ZEBRA and out["get"].structuredContent["totalLines"] == 3
    ctx = out["context"]
    assert "zebracorn" in text_of(ctx) and ctx.structuredContent["sources"][0]["path"] == "memory/2026-01-02.md"
    assert ctx.structuredContent["tokens"] <= 200
    st = out["status"].structuredContent
    assert st["fresh"] is True and st["files"] == 4 and st["roots"][0]["watched"]
    rem = out["remember"].structuredContent
    assert not out["remember"].isError and rem["decision"] == "appended" and rem["citation"].startswith(rem["path"])
    assert "billing service on Fridays" in (root / rem["path"]).read_text()
    assert out["question"].structuredContent["decision"] == "rejected" and not out["question"].isError
    assert any("billing" in r["snippet"] for r in out["after"].structuredContent["results"])
    assert out["bad"].isError and "memory_search: invalid arguments: 'query' is required" in text_of(out["bad"])
    assert out["outside"].isError and "not a file inside a memory root" in text_of(out["outside"])
    assert not out["third"].isError  # the 2nd write this minute: the rejected attempt did not count
    limited = out["limited"]
    assert limited.isError and "rate limit" in text_of(limited) and "write.max_per_minute" in text_of(limited)


@pytest.mark.slow
def test_direct_session_is_confined_to_its_peer(running, tmp_path: Path) -> None:
    d, root = running

    async def body(s: Any) -> dict[str, Any]:
        return {
            "search": await s.call_tool("memory_search", {"query": "quokka", "mode": "keyword"}),
            "other": await s.call_tool("memory_get", {"path": "peers/bob/MEMORY.md"}),
            "shared": await s.call_tool("memory_remember", {"content": "Alice's team ships the mobile app in May.",
                                                            "namespace": "default"}),
            "own": await s.call_tool("memory_remember", {"content": "Alice prefers async standups over calls."}),
        }

    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", body, "--session", "direct", "--peer", "alice")
    paths = {r["path"] for r in out["search"].structuredContent["results"]}
    assert paths == {"peers/alice/MEMORY.md"}
    for key in ("other", "shared"):
        assert out[key].isError, key
        assert text_of(out[key]).startswith("permission denied: a direct session may not")
        assert "this MCP server acts as a direct session (peer alice)" in text_of(out[key])
    own = out["own"].structuredContent
    assert own["decision"] == "appended" and own["path"] == "peers/alice/MEMORY.md"
    assert "async standups" in (root / own["path"]).read_text()
    assert not any("mobile app" in f.read_text() for f in root.rglob("*.md"))


@pytest.mark.slow
def test_an_agent_session_hands_its_conversation_over_once(running, tmp_path: Path) -> None:
    """memory_observe through a real MCP session: captured in the agent's own session note, a re-send adds
    nothing, and the confined agent sees no absolute path."""
    d, root = running
    convo = "user: Which queue do we use for billing?\nassistant: The billing service uses the zebracorn queue."

    async def body(s: Any) -> dict[str, Any]:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        first = await s.call_tool("memory_observe", {"transcript": convo, "session_id": "conv-1"})
        again = await s.call_tool("memory_observe", {"transcript": convo, "session_id": "conv-1"})
        bad = await s.call_tool("memory_observe", {"transcript": "user: hi", "namespace": "agent:other"})
        return {"tools": tools, "first": first, "again": again, "bad": bad}

    out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", body, "--session", "agent", "--agent", "coder")
    tool = out["tools"]["memory_observe"]
    assert not tool.annotations.readOnlyHint and tool.annotations.destructiveHint and tool.annotations.idempotentHint
    first, again = out["first"].structuredContent, out["again"].structuredContent
    for res in (out["first"], out["again"]):
        assert not res.isError, text_of(res)
        Draft202012Validator(tool.outputSchema).validate(res.structuredContent)
        assert str(root) not in json.dumps(res.structuredContent) + text_of(res)
    assert first["note"].startswith("agents/coder/sessions/") and first["note"].endswith("-conv-1.md")
    assert (first["captured"], again["captured"], again["seen"]) == (2, 0, 2)
    assert first["extraction"] == {"state": "off"} and text_of(out["first"]).startswith("Captured 2 new turn(s)")
    assert "zebracorn queue" in (root / first["note"]).read_text()
    assert out["bad"].isError and text_of(out["bad"]).startswith("permission denied")


@pytest.mark.slow
def test_daemon_down_every_tool_says_how_to_start_it(short_dir: Path, tmp_path: Path) -> None:
    sock = short_dir / "absent.sock"
    calls = {"memory_search": {"query": "x"}, "memory_get": {"path": "MEMORY.md"},
             "memory_context": {"query": "x", "max_tokens": 100}, "memory_remember": {"content": "A fact."},
             "memory_status": {}}

    async def body(s: Any) -> tuple[set[str], dict[str, Any]]:
        names = {t.name for t in (await s.list_tools()).tools}
        return names, {name: await s.call_tool(name, args) for name, args in calls.items()}

    names, results = run_session(sock, tmp_path / "mcp.log", body)
    assert names == NAMES
    for name, res in results.items():
        assert res.isError, name
        assert f"memoryd is not running (no socket at {sock})" in text_of(res) and "memoryd run" in text_of(res)
    assert "mcp.daemon_not_running" in (tmp_path / "mcp.log").read_text()


@pytest.mark.slow
def test_cli_import_stays_free_of_the_sdk_and_initialize_is_quick(short_dir: Path, tmp_path: Path) -> None:
    probe = "import sys, memoryd.daemon.cli, memoryd.daemon.client.cli_mcp; " \
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic', 'anyio')))"
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
    t0 = time.monotonic()
    run_session(short_dir / "absent.sock", tmp_path / "mcp.log", lambda s: asyncio.sleep(0))
    # The SDK import dominates (~0.7 s of CPU); the bound only catches a server that hangs or loads the index.
    assert time.monotonic() - t0 < 30


def test_memory_status_takes_fresh_from_the_daemon() -> None:
    """The daemon decides what fresh means; the bridge only falls back for a daemon without the field."""
    from memoryd.daemon.client.mcp_shapes import _status

    busy = {"pending": 0, "reconciling": False}
    assert _status({}, {**busy, "fresh": False})[1]["fresh"] is False
    assert _status({}, busy)[1]["fresh"] is True
    assert _status({}, {"pending": 2, "reconciling": False})[1]["fresh"] is False


def test_search_snippets_leave_out_entry_markers() -> None:
    from memoryd.daemon.client.mcp_shapes import _search

    hit = {"path": "user/preferences.md", "start_line": 3, "end_line": 3, "score": 0.9, "heading": "",
           "text": "- Prefers tea. <!-- memoryd: importance=4 reinforced=2 -->"}
    _text, out = _search({"query": "tea"}, {"hits": [hit], "mode": "hybrid", "took_ms": 1.0})
    assert out["results"][0]["snippet"] == "- Prefers tea."
    Draft202012Validator(BY_NAME["memory_search"].output).validate(out)


@pytest.mark.slow
def test_a_confined_session_is_not_offered_the_owners_tools(short_dir: Path, tmp_path: Path) -> None:
    """Seed 003: update_* and promote are the owner's; a direct session's host never sees them listed."""

    async def body(s: Any) -> set[str]:
        return {t.name for t in (await s.list_tools()).tools}

    names = run_session(short_dir / "absent.sock", tmp_path / "mcp.log", body, "--session", "direct", "--peer", "alice")
    assert names == NAMES - {"memory_update_section", "memory_promote"}
