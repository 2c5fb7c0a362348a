"""A full disk at every step of every edit: an acknowledged write is in its file with a readable, undoable
history record; a refused one left every file as it was and says "no space left on device" by directory.

The disk fills at the Nth ``write``/``fsync`` of the edit (:mod:`tests.disk_full`) — in the data dir only
(the history, the journal), or in the data dir and the memory root both (then even putting a file back
fails, and the next start does it) — and stays full until the edit has answered; then space "comes back"
and the daemon restarts (a fresh History, the journal recovery).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.write import _write_error_of
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import DISK_FULL, RpcError
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.errors import DiskFullError
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.editor import MemoryEditor
from tests.disk_full import full_disk
from tests.helpers import make_config, running_daemon
from tests.write.test_write_ahead import NOW, Env, _seed, entries_of, plan
from tests.write_fixtures import HASH_WRITE

Op = Callable[[MemoryEditor, str | None], Any]
OPS: dict[str, Op] = {
    "append": lambda ed, _: ed.remember(plan("The deploy window moved to Tuesday mornings.")),
    "replace": lambda ed, _: ed.remember(plan("The user prefers Neovim as their editor.")),
    "reinforce": lambda ed, _: ed.remember(plan("the user prefers vim as their editor")),
    "forget": lambda ed, _: ed.forget("MEMORY.md", 12),
    "undo": lambda ed, rid: ed.undo(str(rid)),
}


def _env(base: Path) -> Env:
    root, data = base / "root", base / "data"
    (root / "user").mkdir(parents=True)
    data.mkdir(parents=True)
    cfg = make_config(root, data)
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    return Env(root, data, open_index(cfg, HashEmbedder()), hist.History.in_data_dir(data), cfg_write=cfg.write)


def _files(env: Env) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(env.root.rglob("*.md"))}


def _history_lines_parse(env: Env) -> None:
    """No torn or glued line anywhere: every line of both rings is one JSON record."""
    for path in env.history.paths.values():
        if path.exists():
            for raw in path.read_bytes().splitlines():
                assert isinstance(json.loads(raw), dict), raw[:80]


@pytest.mark.parametrize("scope", ["data", "data+root"])
@pytest.mark.parametrize("kind", list(OPS))
def test_a_full_disk_at_any_step_never_loses_an_entry_or_a_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  kind: str, scope: str) -> None:
    for n in range(1, 40):
        env = _env(tmp_path / f"n{n}")
        try:
            _seed(env)
            rid = str(env.editor().forget("MEMORY.md", 13).history_id) if kind == "undo" else None
            before, known = _files(env), {r["id"] for r in env.history.records()}
            folders = [env.data] + ([env.root] if scope == "data+root" else [])
            with full_disk(monkeypatch, *folders) as disk:
                disk.arm(n)
                try:
                    out, refused = OPS[kind](env.editor(), rid), None
                except DiskFullError as exc:
                    out, refused = None, exc
                disk.disarm()
            env.restart()  # space is back; a new daemon starts
            _history_lines_parse(env)
            assert not list((env.data / "journal").glob("j-*")), "every intent was settled"
            if refused is not None:
                assert "no space left on device" in str(refused) and refused.directory
                assert Path(refused.directory).is_relative_to(env.data if scope == "data" else tmp_path / f"n{n}")
                assert _files(env) == before, f"n={n}: a refused {kind} changed a file"
                assert {r["id"] for r in env.history.records()} == known, f"n={n}: a refused {kind} left a record"
                continue
            assert _files(env) != before, f"n={n}: an acknowledged {kind} is in no file"
            hid = out.history_id
            if kind == "undo":
                assert env.history.find(str(rid)).get("undone_by") == hid  # type: ignore[union-attr]
            elif kind != "append":
                assert hid is not None and env.history.find(hid) is not None, f"n={n}: no readable record"
                env.editor().undo(hid)  # undoable: the entry comes back
                assert len(entries_of(env.root)) == len(set(entries_of(env.root)))
            if disk.failed == 0:  # the edit finished before the Nth call: every step was tried
                assert n > 1
                return
        finally:
            env.index.close()
    raise AssertionError("the edit never finished within 40 calls")


def test_a_torn_history_line_never_swallows_the_next_acknowledged_forget(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The red team's repro (#38, 1): the history append is cut mid-line by a full disk; the next forget,
    acknowledged once space is back, must have a record its undo finds — also after a restart."""
    env = _env(tmp_path)
    try:
        _seed(env)
        with full_disk(monkeypatch, env.data, match="history") as disk:
            disk.arm(1)
            for _ in range(2):  # the journal file fits, the history line is torn
                with pytest.raises(DiskFullError, match="no space left on device"):
                    env.editor().forget("MEMORY.md", 12)
            disk.disarm()
        assert "- The office is in Lisbon." in (env.root / "MEMORY.md").read_text()  # refused: still there
        out = env.editor().forget("MEMORY.md", 12)
        env.restart()
        back = env.editor().undo(str(out.history_id))
        assert back.decision == "restored"
        assert "- The office is in Lisbon." in (env.root / "MEMORY.md").read_text()
        _history_lines_parse(env)
    finally:
        env.index.close()


def test_a_torn_tail_left_by_a_kill_is_cut_at_open_and_before_each_append(tmp_path: Path) -> None:
    h = hist.History(tmp_path / "history.jsonl")
    first = h.append(hist.entry(hist.FORGET, tmp_path, "a.md", 1, old="one", now=NOW))
    with h.path.open("ab") as f:
        f.write(b'{"id":"h-00000000000000aa","time":"2025')  # a kill mid-append
    second = h.append(hist.entry(hist.FORGET, tmp_path, "a.md", 1, old="two", now=NOW))
    again = hist.History(tmp_path / "history.jsonl")
    assert [r["id"] for r in again.records()] == [first["id"], second["id"]]
    with again.path.open("ab") as f:
        f.write(b'{"id":"h-00')
    again.heal()  # at start
    assert again.path.read_bytes().endswith(b"\n") and len(again.path.read_bytes().splitlines()) == 2


def test_disk_full_is_its_own_rpc_code_naming_the_directory(tmp_path: Path) -> None:
    err = _write_error_of(DiskFullError.of(OSError(28, "No space left on device"), tmp_path, "the write history"))
    assert isinstance(err, RpcError) and err.code == DISK_FULL and err.data == {"directory": str(tmp_path)}
    assert str(tmp_path) in err.message and "no space left on device" in err.message


def test_a_forget_on_a_full_disk_answers_disk_full_over_the_socket_and_changes_nothing(
        tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#38, 16: not -32603 "internal error": its own code, the directory, and the file as it was."""
    text = "# Memory\n\n- The office is in Lisbon.\n- Tea at four.\n"
    with running_daemon(tmp_path, short_dir / "m.sock", {"MEMORY.md": text}) as (d, client, root):
        with full_disk(monkeypatch, d.cfg.data_dir, match="history") as disk:
            disk.arm(1)
            with pytest.raises(RpcClientError) as full:
                client.call("forget", {"path": "MEMORY.md", "line": 3})
            disk.disarm()
        assert full.value.code == DISK_FULL and "no space left on device" in full.value.message
        assert full.value.data == {"directory": str(d.cfg.data_dir)}
        assert (root / "MEMORY.md").read_text() == text
        out = client.call("forget", {"path": "MEMORY.md", "line": 3})  # space is back
        assert client.call("undo", {"id": out["history_id"]})["decision"] == "restored"
