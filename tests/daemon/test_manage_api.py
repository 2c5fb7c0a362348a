"""Memory management as the daemon serves it: list/export/import/clear/stats, update_section and promote
over the socket, the CLI and the MCP bridge — scope, limits, audit and history (undo) included."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client import cli
from memoryd.daemon.client.mcp_server import DaemonBridge
from memoryd.daemon.client.mcp_tools import BY_NAME, ToolError
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.exits import EXIT_USAGE
from memoryd.daemon.rpc.errors import (
    ACCESS_DENIED,
    BAD_TARGET,
    CONTENT_TOO_LARGE,
    ENTRY_NOT_FOUND,
    INVALID_PARAMS,
    SECTION_REFUSED,
    TURN_LIMIT,
    WRITE_CONFLICT,
    WRITE_DISABLED,
)
from memoryd.indexer.config import Config
from memoryd.indexer.markdown.entrymeta import split
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
ALICE = {"kind": "direct", "peer": "alice"}
SECRET = "ghp_Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bA"
ALICE_MEMORY = ("## Decisions\n\n- Alice decided to use the Falcon framework for the billing service.\n\n"
                "## Current Focus\n\n- Reviewing the billing schema.\n")
BANK = ("# Active context\n\n<!-- MACHINE_BLOCK_START -->\n## Current Focus\n\n- Writing the export command.\n\n"
        "## Progress\n\n- list works\n<!-- USER_BLOCK_START -->\n- the user's own note\n<!-- USER_BLOCK_END -->\n"
        "<!-- MACHINE_BLOCK_END -->\n")
FILES = {
    "peers/alice/MEMORY.md": ALICE_MEMORY,
    "peers/bob/MEMORY.md": "## Current Focus\n\n- Bob studies the quokka migration.\n",
    "user/preferences.md": "## Preferences\n\n- The user prefers green tea in the morning.\n",
    "memory-bank/activeContext.md": BANK,
}


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(
            cfg.write, **{**HASH_WRITE, "max_per_minute": 1000, "max_per_turn": 3}))  # type: ignore[arg-type]

    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak) as started:
        yield started


def _code(client: Client, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(RpcClientError) as e:
        client.call(method, params)
    return e.value.code


# -- reads ---------------------------------------------------------------------------------


def test_list_pages_through_everything_for_the_owner(daemon) -> None:
    _d, client, _root = daemon
    first = client.call("list", {"limit": 2})
    assert [e["path"] for e in first["entries"]] == ["memory-bank/activeContext.md"] * 2
    rest = client.call("list", {"limit": 100, "cursor": first["next_cursor"]})
    assert rest["next_cursor"] is None
    texts = [e["text"] for e in first["entries"] + rest["entries"]]
    assert len(texts) == 6 and "the user's own note" not in texts
    tea = next(e for e in rest["entries"] if e["path"] == "user/preferences.md")
    assert (tea["type"], tea["namespace"], tea["start_line"], tea["end_line"]) == ("preference", "default", 3, 3)
    assert set(tea) >= {"importance", "reinforcements", "created", "updated", "section", "id"}


def test_confined_sessions_see_only_their_namespace(daemon) -> None:
    _d, client, _root = daemon
    listed = client.call("list", {"session": ALICE})["entries"]
    assert {e["path"] for e in listed} == {"peers/alice/MEMORY.md"}
    assert list(client.call("stats", {"session": ALICE})["namespaces"]) == ["peer:alice"]
    export = client.call("export", {"session": ALICE})["text"]
    assert "Falcon" in export and "quokka" not in export and "green tea" not in export
    for method in ("list", "stats", "export"):
        for ns in ("peer:bob", "default"):
            assert _code(client, method, {"namespace": ns, "session": ALICE}) == ACCESS_DENIED, (method, ns)


def test_stats_and_filters(daemon) -> None:
    _d, client, root = daemon
    st = client.call("stats", {})
    assert st["namespaces"]["peer:alice"] == {"files": 1, "entries": 2,
                                              "bytes": (root / "peers/alice/MEMORY.md").stat().st_size}
    assert st["total"]["entries"] == 6 and st["total"]["files"] == 4
    decisions = client.call("list", {"type": "decision"})["entries"]
    assert [e["text"][:5] for e in decisions] == ["Alice"]
    assert _code(client, "list", {"since": "2026-13"}) == INVALID_PARAMS
    assert _code(client, "list", {"cursor": "no-line"}) == INVALID_PARAMS
    assert _code(client, "export", {"format": "markdown", "type": "decision"}) == INVALID_PARAMS
    bundle = client.call("export", {"format": "markdown", "namespace": "peer:alice"})
    assert bundle["count"] == 1
    assert bundle["text"] == f"<!-- memoryd:file peers/alice/MEMORY.md (peer:alice) -->\n{ALICE_MEMORY}"


# -- export / import -----------------------------------------------------------------------


def test_export_then_import_goes_through_gate_privacy_and_dedup(daemon) -> None:
    _d, client, root = daemon
    exported = client.call("export", {"namespace": "peer:alice"})
    assert exported["count"] == 2 and json.loads(exported["text"].splitlines()[0])["namespace"] == "peer:alice"
    lines = [json.dumps({"text": json.loads(line)["text"], "namespace": "agent:coder"})
             for line in exported["text"].splitlines()]
    lines += [json.dumps({"text": f"The deploy token is {SECRET}"}), json.dumps({"text": "ok"}), "{broken"]
    data = "\n".join(lines) + "\n"
    dry = client.call("import", {"data": data, "dry_run": True})
    assert [e["decision"] for e in dry["entries"]] == ["would_append", "would_append", "rejected", "rejected",
                                                      "invalid"]
    assert [e.get("stage") for e in dry["entries"][2:4]] == ["privacy", "gate"]
    assert not (root / "agents").exists()  # a dry run writes nothing
    done = client.call("import", {"data": data})
    assert done["summary"] == {"appended": 2, "rejected": 2, "invalid": 1}
    assert {e["path"] for e in done["entries"] if e["decision"] == "appended"} == {
        "agents/coder/agent/decisions.md", "agents/coder/memory/" + done["entries"][1]["path"].rsplit("/", 1)[1]}
    again = client.call("import", {"data": lines[0]})
    assert again["entries"][0]["decision"] == "reinforced"  # dedup: already imported
    assert SECRET not in json.dumps(client.call("audit", {"tail": 20}))


def test_import_and_clear_are_for_the_owner_only(daemon) -> None:
    _d, client, _root = daemon
    assert _code(client, "import", {"data": '{"text": "x"}', "session": ALICE}) == ACCESS_DENIED
    assert _code(client, "clear", {"namespace": "peer:alice", "session": ALICE}) == ACCESS_DENIED
    assert _code(client, "clear", {"namespace": "peers/alice"}) == BAD_TARGET
    assert _code(client, "import", {"data": "\n".join(['{"text": "x"}'] * 1001)}) == INVALID_PARAMS


# -- clear ---------------------------------------------------------------------------------


def test_clear_removes_every_entry_and_one_undo_puts_them_back(daemon) -> None:
    _d, client, root = daemon
    before = (root / "peers/alice/MEMORY.md").read_text()
    res = client.call("clear", {"namespace": "peer:alice"})
    assert (res["removed"], res["files"]) == (2, 1)
    after = (root / "peers/alice/MEMORY.md").read_text()
    assert "Falcon" not in after and after.startswith("## Decisions") and "## Current Focus" in after
    assert client.call("list", {"namespace": "peer:alice"})["entries"] == []
    assert not client.call("search", {"query": "Falcon", "mode": "keyword"})["hits"]
    assert (root / "peers/bob/MEMORY.md").read_text() == FILES["peers/bob/MEMORY.md"]
    history = client.call("history", {"limit": 5})["entries"]
    assert [h["action"] for h in history] == ["clear", "forget", "forget"]
    undone = client.call("undo", {"id": res["history_id"]})
    assert undone["decision"] == "restored" and "2 entries restored" in undone["reason"]
    assert (root / "peers/alice/MEMORY.md").read_text() == before
    assert client.call("search", {"query": "Falcon", "mode": "keyword"})["hits"]
    assert _code(client, "undo", {"id": res["history_id"]}) == WRITE_CONFLICT  # undone once only
    audit = client.call("audit", {"tail": 3})["entries"]
    assert [(e["action"], e["decision"]) for e in audit] == [("clear", "cleared"), ("undo", "restored"),
                                                              ("undo", "error")]


# -- update_section ----------------------------------------------------------------------------


def test_update_section_replaces_the_body_and_undo_restores_it(daemon) -> None:
    _d, client, root = daemon
    res = client.call("update_section", {"path": "memory-bank/activeContext.md", "section": "current focus",
                                         "content": "- Shipping the import command.\n- Then docs."})
    assert (res["decision"], res["line"]) == ("updated", 4)
    text = (root / "memory-bank/activeContext.md").read_text()
    assert "- Shipping the import command.\n- Then docs.\n\n## Progress" in text and "export command" not in text
    assert client.call("search", {"query": "Shipping import", "mode": "keyword"})["hits"]
    client.call("undo", {"id": res["history_id"]})
    assert (root / "memory-bank/activeContext.md").read_text() == BANK
    again = client.call("update_section", {"path": "memory-bank/activeContext.md", "section": "Current Focus",
                                           "content": "- Writing the export command."})
    assert again["decision"] == "unchanged"


@pytest.mark.parametrize(("params", "code", "rule"), [
    ({"section": "Decisions"}, SECTION_REFUSED, "write.sections"),
    ({"section": "Progress"}, SECTION_REFUSED, "user_block"),
    ({"content": "## Sneaky\n- x"}, SECTION_REFUSED, "body"),
    ({"section": "Next Steps"}, ENTRY_NOT_FOUND, None),
    ({"path": "memory-bank/nope.md"}, ENTRY_NOT_FOUND, None),
    ({"path": "../outside.md"}, BAD_TARGET, None),
    ({"content": "x" * 3000}, CONTENT_TOO_LARGE, None),
])
def test_update_section_refusals(daemon, params: dict[str, Any], code: int, rule: str | None) -> None:
    _d, client, root = daemon
    base = {"path": "memory-bank/activeContext.md", "section": "Current Focus", "content": "- new focus"}
    with pytest.raises(RpcClientError) as e:
        client.call("update_section", {**base, **params})
    assert e.value.code == code
    if rule is not None:
        assert e.value.data == {"rule": rule}
    assert (root / "memory-bank/activeContext.md").read_text() == BANK


def test_update_section_is_the_owners_alone_and_filters_secrets(daemon) -> None:
    """Seed 003's matrix: every update_* is the owner's; direct and group sessions may not, not even their own."""
    _d, client, root = daemon
    bob = {"path": "peers/bob/MEMORY.md", "section": "Current Focus", "content": "- hijacked"}
    mine = {"path": "peers/alice/MEMORY.md", "section": "Current Focus"}
    assert _code(client, "update_section", {**bob, "session": ALICE}) == ACCESS_DENIED
    assert _code(client, "update_section", {**mine, "content": "- Planning Q2.", "session": ALICE}) == ACCESS_DENIED
    assert (root / "peers/alice/MEMORY.md").read_text() == ALICE_MEMORY
    leaked = client.call("update_section", {**mine, "content": f"- token {SECRET}"})
    assert (leaked["decision"], leaked["stage"]) == ("rejected", "privacy")
    assert SECRET not in (root / "peers/alice/MEMORY.md").read_text()
    turn = {"kind": "owner", "turn": "t1"}  # the owner's agent: held to the per-turn limit
    for quarter in ("Q2", "Q3", "Q4"):  # write.max_per_turn = 3
        assert client.call("update_section", {**mine, "content": f"- Planning {quarter}.", "session": turn})[
            "decision"] == "updated"
    assert _code(client, "update_section", {**mine, "content": "- Planning Q5.", "session": turn}) == TURN_LIMIT
    assert "Planning Q4." in (root / "peers/alice/MEMORY.md").read_text()


# -- promote ----------------------------------------------------------------------------------


def test_promote_copies_with_a_back_reference_through_dedup(daemon) -> None:
    _d, client, root = daemon
    res = client.call("promote", {"path": "peers/alice/MEMORY.md", "line": 3, "text": FALCON})
    assert (res["decision"], res["path"], res["type"]) == ("appended", "agent/decisions.md", "decision")
    assert res["source"] == {"path": "peers/alice/MEMORY.md", "line": 3, "namespace": "peer:alice"}
    line, meta = split((root / res["path"]).read_text().splitlines()[res["line"] - 1])
    assert line == ("- Alice decided to use the Falcon framework for the billing service. "
                    "(from peers/alice/MEMORY.md)")
    assert meta is not None and meta.reinforced == 0
    assert (root / "peers/alice/MEMORY.md").read_text() == ALICE_MEMORY  # the source stays
    again = client.call("promote", {"path": "peers/alice/MEMORY.md", "line": 3, "text": FALCON})
    assert (again["decision"], again["path"]) == ("reinforced", "agent/decisions.md")
    assert (root / res["path"]).read_text().count("Falcon") == 1
    meta = split((root / res["path"]).read_text().splitlines()[res["line"] - 1])[1]
    assert meta is not None and meta.reinforced == 1  # the second promote counted


@pytest.mark.parametrize(("params", "code"), [
    ({"session": ALICE}, ACCESS_DENIED),
    ({"path": "user/preferences.md"}, BAD_TARGET),  # not a peer or group namespace
    ({"to": "peer:bob"}, BAD_TARGET),  # not an owner namespace
    ({"line": 2}, ENTRY_NOT_FOUND),
])
def test_promote_refusals(daemon, params: dict[str, Any], code: int) -> None:
    _d, client, _root = daemon
    assert _code(client, "promote", {"path": "peers/alice/MEMORY.md", "line": 3, **params}) == code


FALCON = "Alice decided to use the Falcon framework for the billing service."


def test_promote_with_the_text_refuses_a_line_that_moved(daemon) -> None:
    """#38 item 18: the peer wrote one more entry between the owner's list and promote; the wrong one was copied."""
    _d, client, root = daemon
    md = root / "peers/alice/MEMORY.md"
    md.write_text(ALICE_MEMORY.replace("## Decisions\n\n", "## Decisions\n\n- Alice wrote this one later.\n"))
    with pytest.raises(RpcClientError) as err:
        client.call("promote", {"path": "peers/alice/MEMORY.md", "line": 3, "text": FALCON})
    assert err.value.code == ENTRY_NOT_FOUND
    assert "the entry on line 3 changed" in err.value.message and "later" in err.value.message
    assert not (root / "agent/decisions.md").exists()  # nothing was copied
    res = client.call("promote", {"path": "peers/alice/MEMORY.md", "line": 4, "text": f"- {FALCON}"})
    assert res["decision"] == "appended" and "Falcon" in (root / res["path"]).read_text()


def test_promote_text_is_passed_by_the_cli_and_required_by_mcp(daemon, capsys: pytest.CaptureFixture[str]) -> None:
    d, _client, root = daemon
    sock = ["--socket", str(d.cfg.socket_path)]
    assert cli.main(["promote", *sock, "peers/alice/MEMORY.md:3", "--text", "Alice drinks tea."]) != 0
    assert "the entry on line 3 changed" in capsys.readouterr().err
    assert not (root / "agent/decisions.md").exists()
    assert "text" in BY_NAME["memory_promote"].schema["required"]


# -- CLI ---------------------------------------------------------------------------------------


def test_cli_commands(daemon, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, _client, root = daemon
    sock = ["--socket", str(d.cfg.socket_path)]
    assert cli.main(["list", *sock, "--namespace", "peer:alice", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "\npeers/alice/MEMORY.md:3  [decision" in "\n" + out and "next: --cursor peers/alice/MEMORY.md:3" in out
    assert cli.main(["stats", *sock]) == 0 and "peer:alice" in capsys.readouterr().out
    dump = tmp_path / "alice.jsonl"
    assert cli.main(["export", *sock, "--namespace", "peer:alice", "-o", str(dump)]) == 0
    assert len(dump.read_text().splitlines()) == 2
    assert cli.main(["import", *sock, "--dry-run", str(dump)]) == 0  # each line restores to its path: already there
    assert "dry run: 2 unchanged" in capsys.readouterr().out
    assert cli.main(["clear", *sock, "peer:bob"]) == EXIT_USAGE and "--yes" in capsys.readouterr().err
    assert cli.main(["clear", *sock, "peer:bob", "--yes"]) == 0
    assert "undo with: memoryd undo h-" in capsys.readouterr().out
    body = tmp_path / "focus.md"
    body.write_text("- Focus from a file.\n")
    assert cli.main(["update-section", *sock, "peers/alice/MEMORY.md", "Current Focus", "--file", str(body)]) == 0
    assert "Focus from a file." in (root / "peers/alice/MEMORY.md").read_text()
    capsys.readouterr()
    assert cli.main(["promote", *sock, "peers/alice/MEMORY.md:3"]) == 0
    assert "\nappended: agent/decisions.md:" in "\n" + capsys.readouterr().out
    assert cli.main(["promote", *sock, "peers/alice/MEMORY.md"]) == EXIT_USAGE


# -- MCP ---------------------------------------------------------------------------------------


def test_mcp_bridge_lists_scoped_and_writes_through_the_daemon(daemon) -> None:
    d, _client, root = daemon
    alice = DaemonBridge(d.cfg.socket_path, ALICE)
    _text, listed = alice.call_tool("memory_list", {"limit": 1})
    assert [e["citation"] for e in listed["entries"]] == ["peers/alice/MEMORY.md:3-3"]
    assert listed["nextCursor"] == "peers/alice/MEMORY.md:3"
    with pytest.raises(ToolError, match="permission denied"):
        alice.call_tool("memory_list", {"namespace": "peer:bob"})
    with pytest.raises(ToolError, match="owner"):  # update_* is the owner's (seed 003)
        alice.call_tool("memory_update_section", {"path": "peers/alice/MEMORY.md", "section": "Current Focus",
                                                  "content": "- via MCP"})
    _text, upd = DaemonBridge(d.cfg.socket_path).call_tool(
        "memory_update_section", {"path": "peers/alice/MEMORY.md", "section": "Current Focus", "content": "- via MCP"})
    assert upd["decision"] == "updated" and "- via MCP" in (root / "peers/alice/MEMORY.md").read_text()
    with pytest.raises(ToolError, match="permission denied"):
        alice.call_tool("memory_promote", {"path": "peers/alice/MEMORY.md", "line": 3, "text": FALCON})
    _text, promoted = DaemonBridge(d.cfg.socket_path).call_tool(
        "memory_promote", {"path": "peers/alice/MEMORY.md", "line": 3, "text": FALCON})
    assert promoted["decision"] == "appended" and promoted["citation"].startswith("agent/decisions.md:")


def test_clear_skips_a_file_it_may_not_write_and_names_it(daemon) -> None:
    _d, client, root = daemon
    (root / "groups/dev").mkdir(parents=True)
    (root / "groups/dev/MEMORY.md").write_text("- Standup at nine.\n")
    (root / "groups/dev/notes.md").write_text("- Retro on Fridays.\n")
    os.link(root / "groups/dev/notes.md", root / "groups/dev/notes-link.md")  # a hard link: never written through
    res = client.call("clear", {"namespace": "group:dev"})
    assert (res["removed"], res["files"]) == (1, 1)
    assert [s["path"] for s in res["skipped"]] == ["groups/dev/notes-link.md", "groups/dev/notes.md"]
    assert "hard links" in res["skipped"][0]["reason"]
    assert (root / "groups/dev/notes.md").read_text() == "- Retro on Fridays.\n"


def test_writes_are_refused_when_writing_is_disabled(tmp_path: Path, short_dir: Path) -> None:
    def off(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, enabled=False))

    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=off) as (_d, client, root):
        for method, params in [("import", {"data": '{"text": "The build runs on Linux."}'}),
                               ("clear", {"namespace": "peer:alice"}),
                               ("promote", {"path": "peers/alice/MEMORY.md", "line": 3}),
                               ("update_section", {"path": "peers/alice/MEMORY.md", "section": "Current Focus",
                                                   "content": "- x"})]:
            assert _code(client, method, params) == WRITE_DISABLED, method
        assert client.call("list", {})["entries"]  # reads still work
        assert (root / "peers/alice/MEMORY.md").read_text() == ALICE_MEMORY
