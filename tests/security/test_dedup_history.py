"""The write history and undo: records, bounds, 0600, round trips in the writer, through the socket and the CLI."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memoryd.daemon.client import cli_history
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED, ENTRY_NOT_FOUND, WRITE_CONFLICT
from memoryd.indexer.access import DEFAULT
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import EntryNotFound, WriteConflict
from memoryd.indexer.search.query import Query
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config
from tests.write_fixtures import HASH_WRITE, WriteDaemon

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
DIRECT = {"kind": "direct", "peer": "alice"}


# -- the history file -------------------------------------------------------------


def test_history_file_is_0600_even_under_umask_0(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        h = hist.History(tmp_path / "history.jsonl", max_bytes=2000)
        h.append(hist.entry(hist.FORGET, tmp_path, "a.md", 3, old="x", block=["- x"]))
        assert stat.S_IMODE((tmp_path / "history.jsonl").stat().st_mode) == 0o600
        for i in range(40):  # past max_bytes: trimmed through a temporary file, still 0600
            h.append(hist.entry(hist.FORGET, tmp_path, "a.md", i + 1, old=f"entry {i}" * 5, block=["- x"]))
        assert stat.S_IMODE((tmp_path / "history.jsonl").stat().st_mode) == 0o600
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]  # no temporary file left


def test_history_is_bounded_and_keeps_the_newest(tmp_path: Path) -> None:
    h = hist.History(tmp_path / "h.jsonl", max_bytes=4000)
    ids = [h.append(hist.entry(hist.FORGET, tmp_path, "a.md", i + 1, old=f"entry {i}", block=[f"- entry {i}"]))["id"]
           for i in range(200)]
    assert (tmp_path / "h.jsonl").stat().st_size <= 4000
    kept = [r["id"] for r in h.records()]
    assert kept == ids[-len(kept):] and 5 < len(kept) < 200
    assert h.find(ids[0]) is None and h.find(ids[-1]) is not None


def test_listing_filters_by_path_skips_torn_lines_and_marks_undone(tmp_path: Path) -> None:
    h = hist.History(tmp_path / "h.jsonl")
    a = h.append(hist.entry(hist.REPLACE, tmp_path, "user/prefs.md", 3, old="Vim", new="Neovim", block=["- Vim"]))
    h.append(hist.entry(hist.FORGET, tmp_path, "MEMORY.md", 5, old="tea", block=["- tea"]))
    u = h.append(hist.entry(hist.UNDO, tmp_path, "user/prefs.md", 3, undoes=a["id"]))
    with (tmp_path / "h.jsonl").open("a") as f:
        f.write('{"id": "h-torn", "act')
    assert [r["id"] for r in h.recent("user")] == [u["id"], a["id"]]
    assert h.recent("user/prefs.md", limit=1)[0]["action"] == "undo"
    assert h.find(a["id"])["undone_by"] == u["id"]  # type: ignore[index]
    assert len(h.recent()) == 3 and h.find("h-torn") is None
    with pytest.raises(ValueError, match="history action"):
        hist.entry("rename", tmp_path, "a.md", 1)


# -- the writer -------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[MemoryIndex, Path, MemoryWriter]]:
    root = tmp_path / "root"
    (root / "user").mkdir(parents=True)
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    index = open_index(cfg, HashEmbedder())
    try:
        yield index, root, MemoryWriter(index, root, cfg.write, clock=lambda: NOW,
                                        history=hist.History.in_data_dir(cfg.data_dir))
    finally:
        index.close()


def plan(text: str) -> Accepted:
    p = prepare(text, DEFAULT, date(2025, 3, 1))
    assert isinstance(p, Accepted), p
    return p


def test_replace_then_undo_restores_the_old_lines_exactly(env) -> None:
    index, root, w = env
    w.remember(plan("The user prefers Vim as their editor."))
    f = root / "user" / "preferences.md"
    f.write_text(f.read_text().replace("- The user prefers Vim as their editor. <!-- memoryd: importance=4 -->",
                                       "* The user prefers Vim as their editor.\n  (since 2019)"))
    before = f.read_text()
    out = w.remember(plan("The user prefers Neovim as their editor."), {"kind": "owner"})
    assert out.decision == "replaced" and out.history_id
    rec = w.history.find(out.history_id)
    assert rec["old"] == "The user prefers Vim as their editor." and rec["new"].endswith("Neovim as their editor.")
    assert rec["block"] == ["* The user prefers Vim as their editor.", "  (since 2019)"] and rec["lines"] == 2
    assert rec["session"] == {"kind": "owner"} and rec["action"] == "replace" and rec["root"] == str(root)
    back = w.undo(out.history_id, {"kind": "owner"})
    assert back.decision == "restored" and back.previous == "The user prefers Neovim as their editor."
    assert f.read_text() == before  # byte for byte, continuation line included
    assert index.query(Query("since 2019", mode="keyword")).to_json()["hits"]  # re-indexed
    with pytest.raises(WriteConflict, match="already undone"):
        w.undo(out.history_id)
    assert f.read_text() == before
    with pytest.raises(WriteConflict, match="cannot be undone"):
        w.undo(back.history_id)  # type: ignore[arg-type]
    with pytest.raises(EntryNotFound, match="no such history entry"):
        w.undo("h-0000000000000000")
    undo_rec = w.history.find(back.history_id)
    assert undo_rec["undoes"] == out.history_id and undo_rec["old"] == "The user prefers Neovim as their editor."


def test_undo_of_a_replace_whose_new_entry_was_edited_away_puts_the_old_one_back(env) -> None:
    _, root, w = env
    w.remember(plan("The user prefers Vim as their editor."))
    out = w.remember(plan("The user prefers Neovim as their editor."))
    f = root / "user" / "preferences.md"
    f.write_text(f.read_text().replace("- The user prefers Neovim as their editor.\n", ""))
    w.undo(out.history_id)  # type: ignore[arg-type]
    assert "- The user prefers Vim as their editor." in f.read_text()


def test_forget_then_undo_reappends_the_entry_where_it_was(env) -> None:
    _, root, w = env
    (root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon.\n- Tea is served at four.\n")
    before = (root / "MEMORY.md").read_text()
    out = w.forget("MEMORY.md", 3, session={"kind": "owner"})
    assert out.history_id and "Lisbon" not in (root / "MEMORY.md").read_text()
    w.undo(out.history_id)
    assert (root / "MEMORY.md").read_text() == before  # no front matter: none added


def test_a_reinforcement_of_a_file_without_front_matter_is_recorded_and_undo_writes_the_memory(env) -> None:
    index, root, w = env
    text = "## Preferences\n\n- The user prefers window seats on long flights.\n"
    (root / "user/preferences.md").write_text(text)
    index.index_files([(root, "user/preferences.md")])
    out = w.remember(plan("the user prefers window seats on long flights"))
    assert out.decision == "reinforced" and out.reinforcement == 1  # counted in the entry's marker
    marked = text.replace("flights.\n", "flights. <!-- memoryd: reinforced=1 -->\n")
    assert (root / "user/preferences.md").read_text() == marked
    rec = w.history.find(out.history_id)
    assert (rec["action"], rec["path"], rec["line"]) == ("reinforce", "user/preferences.md", 3)
    assert rec["new"] == "the user prefers window seats on long flights"
    w.undo(out.history_id)  # the count goes back to none, and the absorbed memory is written
    assert (root / "user/preferences.md").read_text() == text + "- the user prefers window seats on long flights\n"


def test_appends_are_not_recorded_but_flag_the_entry_they_may_update(env) -> None:
    _, root, w = env
    w.remember(plan("The user prefers Vim as their editor."))
    out = w.remember(plan("用户现在改用 Neovim 编辑器了。"))
    assert out.decision == "appended" and out.history_id is None
    assert list(w.history.records()) == []
    assert "prefers Vim" in (root / "user" / "preferences.md").read_text()


# -- the socket and the CLI --------------------------------------------------------


def test_history_and_undo_through_the_socket(wd: WriteDaemon) -> None:
    wd.client.call("remember", {"content": "The user prefers Vim as their editor."})
    rep = wd.client.call("remember", {"content": "The user prefers Neovim as their editor."})
    assert rep["decision"] == "replaced" and rep["history_id"].startswith("h-")
    gone = wd.client.call("forget", {"path": "MEMORY.md", "line": 3})
    listed = wd.client.call("history", {})
    assert [e["id"] for e in listed["entries"]] == [gone["history_id"], rep["history_id"]]
    assert listed["path"] == str(wd.d.cfg.data_dir / "history.jsonl")
    assert not str(listed["path"]).startswith(str(wd.root))  # never under a memory root, never indexed
    only = wd.client.call("history", {"path": "user", "limit": 5})["entries"]
    assert [e["id"] for e in only] == [rep["history_id"]] and only[0]["old"] == "The user prefers Vim as their editor."
    undone = wd.client.call("undo", {"id": rep["history_id"]})
    assert undone["decision"] == "restored" and undone["path"] == "user/preferences.md"
    assert "prefers Vim" in (wd.root / "user" / "preferences.md").read_text()
    assert wd.client.call("undo", {"id": gone["history_id"]})["path"] == "MEMORY.md"
    assert "Lisbon" in (wd.root / "MEMORY.md").read_text()
    with pytest.raises(RpcClientError) as e:
        wd.client.call("undo", {"id": rep["history_id"]})
    assert e.value.code == WRITE_CONFLICT
    with pytest.raises(RpcClientError) as e:
        wd.client.call("undo", {"id": "h-ffffffffffffffff"})
    assert e.value.code == ENTRY_NOT_FOUND
    audit = wd.client.call("audit", {"tail": 3})["entries"]
    assert [a["action"] for a in audit[-3:]] == ["undo", "undo", "undo"]
    assert stat.S_IMODE((wd.d.cfg.data_dir / "history.jsonl").stat().st_mode) == 0o600


@pytest.mark.parametrize("session", [DIRECT, {"kind": "group", "group": "team"}])
def test_confined_sessions_may_neither_list_nor_undo(wd: WriteDaemon, session: dict[str, str]) -> None:
    wd.client.call("remember", {"content": "The user prefers Vim as their editor."})
    rid = wd.client.call("remember", {"content": "The user prefers Neovim as their editor."})["history_id"]
    before = (wd.root / "user" / "preferences.md").read_text()
    for method, params in (("history", {}), ("undo", {"id": rid})):
        with pytest.raises(RpcClientError) as e:
            wd.client.call(method, {**params, "session": session})
        assert e.value.code == ACCESS_DENIED, method
    assert (wd.root / "user" / "preferences.md").read_text() == before
    assert "undone_by" not in wd.client.call("history", {})["entries"][0]


def test_bad_params_are_invalid_params(wd: WriteDaemon) -> None:
    for method, params in (("history", {"limit": 0}), ("history", {"path": "a\x00b"}), ("history", {"x": 1}),
                           ("undo", {}), ("undo", {"id": ""}), ("undo", {"id": "h" * 65})):
        with pytest.raises(RpcClientError) as e:
            wd.client.call(method, params)
        assert e.value.code == -32602, (method, params)


def run(w: WriteDaemon, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memoryd")
    cli_history.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args([argv[0], "--socket", str(w.socket), *argv[1:]])
    return cli_history.COMMANDS[args.command](args)


def test_history_and_undo_through_the_cli(wd: WriteDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    wd.client.call("remember", {"content": "The user prefers Vim as their editor."})
    rid = wd.client.call("remember", {"content": "The user prefers Neovim as their editor."})["history_id"]
    capsys.readouterr()
    assert run(wd, "history", "user/preferences.md") == 0
    out = capsys.readouterr().out
    assert f"{rid}  " in out and "replace" in out and "old: The user prefers Vim as their editor." in out
    assert run(wd, "undo", rid) == 0
    assert "restored: user/preferences.md:" in capsys.readouterr().out
    assert run(wd, "history", "--json", "--limit", "2") == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    entries = json.loads(lines[-1])["entries"]
    assert entries[0]["action"] == "undo" and entries[1]["undone_by"] == entries[0]["id"]
    with pytest.raises(RpcClientError, match="already undone"):
        run(wd, "undo", rid)


def test_the_cli_escapes_control_characters_from_entries() -> None:
    assert cli_history._safe("a\x1b]0;PWNED\x07b") == "a\\x1b]0;PWNED\\x07b"
    assert cli_history._safe("x" * 300, 10) == "x" * 9 + "…"


def test_a_forgotten_secret_is_kept_exactly_so_undo_works(env) -> None:
    """The history keeps the exact bytes (0600, never indexed, never logged): a forget of a line holding a
    secret can be undone; what leaves the daemon is redacted (tests/write/test_write_ahead.py)."""
    _, root, w = env
    secret = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1"
    (root / "MEMORY.md").write_text(f"# Memory\n\n- The bot key is {secret} for now.\n- Tea is served at four.\n")
    before = (root / "MEMORY.md").read_text()
    out = w.forget("MEMORY.md", 3)
    assert secret not in (root / "MEMORY.md").read_text()
    assert oct(w.history.path.stat().st_mode & 0o777) == "0o600"
    w.undo(out.history_id)
    assert (root / "MEMORY.md").read_text() == before
