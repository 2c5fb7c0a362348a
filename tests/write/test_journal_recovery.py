"""Journal recovery that never lies: an edit is recorded only when the file shows it, and nothing in a journal
file — damaged, planted, pointing outside the roots — stops a start or writes where no write may.

The crash is the writer's step seam (:data:`memoryd.indexer.write.writer.STEPS`, as in
``tests/write/test_write_ahead.py``); between the crash and the restart the user edits the file by hand.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.app import recover_edits
from memoryd.daemon.private import UnsafeDataDir, check_data_dir
from memoryd.daemon.roots import RootMap
from memoryd.indexer.errors import EntryNotFound, WriteConflict
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.journal import FileEdit, Intent
from tests.write.test_disk_full_writes import _env
from tests.write.test_write_ahead import EDITS, Crash, Env, _seed, _undoable, entries_of, plan

KINDS: dict[str, Any] = {
    "append": lambda ed: ed.remember(plan("The deploy window moved to Tuesday mornings.")),
    "replace": EDITS["replace"], "reinforce": EDITS["reinforce"], "forget": EDITS["forget"],
}
HAND = "\nA paragraph the user wrote by hand while memoryd was down.\n"


@pytest.fixture(name="env")
def env_fixture(tmp_path: Path) -> Iterator[Env]:
    e = _env(tmp_path)
    try:
        yield e
    finally:
        e.index.close()


def _crash(env: Env, kind: str, step: str) -> tuple[str | None, Path, dict[str, Any]]:
    """Run ``kind`` (an edit, or ``undo-forget`` / ``undo-replace``) up to ``step``; the undone id, the file
    the journal names, and the intent."""
    rid = _undoable(env, kind.split("-", 1)[1]) if kind.startswith("undo-") else None
    env.crash_at = step
    with pytest.raises(Crash):
        env.editor().undo(rid) if rid is not None else KINDS[kind](env.editor())
    (jf,) = (env.data / "journal").glob("j-*.json")
    intent = json.loads(jf.read_bytes())
    return rid, env.root / intent["files"][0]["rel"], intent


@pytest.mark.parametrize("kind", [*KINDS, "undo-forget", "undo-replace"])
def test_an_edit_cut_before_its_file_changed_then_a_hand_edit_is_kept_and_never_recorded(env: Env,
                                                                                         kind: str) -> None:
    """#38, 4: the file holds neither the old nor the new text — no record whose effect is not in the file."""
    _seed(env)
    rid, path, intent = _crash(env, kind, "journaled")
    ids = {r["id"] for r in env.history.records()}
    path.write_text((path.read_text() if path.exists() else "") + HAND)  # an append's new file: the user made it
    by_hand = path.read_bytes()
    with capture_logs() as logs:
        counts = env.restart()
    assert counts["kept"] == 1 and path.read_bytes() == by_hand  # as the user left it
    assert {r["id"] for r in env.history.records()} == ids  # no record appended
    kept = [e for e in logs if e["event"] == "journal.recovery_kept"]
    assert kept and str(path) in kept[0]["files"]
    assert (env.data / "journal" / f"{intent['id']}.kept").is_file()  # the trace: the texts before and after
    if rid is not None:  # the undo did not happen: it can still be done, once
        env.editor().undo(rid)
        with pytest.raises(WriteConflict, match="already undone"):
            env.editor().undo(rid)
    now = entries_of(env.root)
    assert len(now) == len(set(now))


@pytest.mark.parametrize("kind", [*KINDS, "undo-forget", "undo-replace"])
def test_an_edit_cut_after_its_file_changed_then_a_hand_edit_elsewhere_is_recorded(env: Env, kind: str) -> None:
    """The edit is visible in the file (its lines in place), though the user edited it since: recorded, undoable."""
    _seed(env)
    rid, path, intent = _crash(env, kind, "written")
    path.write_text(path.read_text() + HAND)
    counts = env.restart()
    assert counts["edited"] == 1 and HAND in path.read_text()
    want = [r["id"] for r in intent["records"]]
    assert all(env.history.find(i) is not None for i in want)
    if rid is not None:
        assert env.history.find(rid).get("undone_by") == want[0]  # type: ignore[union-attr]
    elif want:
        env.editor().undo(want[0])  # the record undoes what the file shows
    assert HAND in path.read_text()


def test_a_replace_whose_new_entry_the_user_rewrote_is_kept_with_its_old_text_in_the_trace(env: Env) -> None:
    _seed(env)
    _, path, intent = _crash(env, "replace", "written")
    path.write_text(path.read_text().replace("Neovim", "Helix"))
    assert env.restart()["kept"] == 1
    assert "Vim as their editor" in (env.data / "journal" / f"{intent['id']}.kept").read_text()
    assert not [r for r in env.history.records() if r["action"] == "replace"]


# -- damaged and planted journal files ---------------------------------------------------------------


def _intent_bytes(root: Path, rel: str, **over: Any) -> bytes:
    """A two-file intent: ``a.md`` already written, ``rel`` not yet (so recovery would finish it)."""
    body = json.loads(Intent.new(root, [FileEdit("a.md", "- 1\n", "- 2\n"), FileEdit(rel, None, "planted\n")],
                                 [hist.entry(hist.FORGET, root, "a.md", 1, old="one")]).to_bytes())
    return json.dumps({**body, **over}).encode()


DAMAGED: dict[str, Any] = {
    "torn": lambda root: b'{"id": "j-00000000000000aa", "fi',
    "not an object": lambda root: b"[1, 2, 3]",
    "a record that is not an object": lambda root: _intent_bytes(root, "b.md", records=[1]),
    "a NUL in a path": lambda root: _intent_bytes(root, "b\x00.md"),
    "deep nesting": lambda root: b"[" * 200_000 + b"]" * 200_000,
    "a deep record": lambda root: _intent_bytes(root, "b.md", records=[{"id": "h-1", "x": json.loads(
        "[" * 60 + "]" * 60)}]),
    "files of the wrong type": lambda root: _intent_bytes(root, "b.md", files={"rel": "a.md"}),
    "an id that is not its name": lambda root: _intent_bytes(root, "b.md", id="j-ffffffffffffffff"),
    "an absolute path": lambda root: _intent_bytes(root, str(root.parent / "outside" / "evil.md")),
    "a dot-dot path": lambda root: _intent_bytes(root, "../outside/evil.md"),
    "a symlinked folder": lambda root: _intent_bytes(root, "linked/evil.md"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_or_planted_journal_file_is_set_aside_and_never_stops_the_start(tmp_path: Path,
                                                                                  case: str) -> None:
    root, data, outside = tmp_path / "root", tmp_path / "data", tmp_path / "outside"
    for d in (root, data / "journal", outside):
        d.mkdir(parents=True)
    (root / "linked").symlink_to(outside)
    (root / "a.md").write_text("- 2\n")
    raw = DAMAGED[case](root)
    name = "j-00000000000000aa" if case != "an id that is not its name" else json.loads(raw)["id"][:2] + "0" * 16
    (data / "journal" / f"{name}.json").write_bytes(raw)
    with capture_logs() as logs:
        counts = recover_edits(hist.History.in_data_dir(data), RootMap([root]))
    assert counts["unreadable"] == 1
    assert [p.name for p in (data / "journal").iterdir()] == [f"{name}.bad"]  # set aside, never deleted
    bad = [e for e in logs if e["event"] == "write.journal_unreadable"]
    assert bad and bad[0]["reason"]
    assert list(outside.iterdir()) == [] and (root / "a.md").read_text() == "- 2\n"  # nothing written anywhere
    assert not (data / "history.jsonl").exists() or (data / "history.jsonl").read_bytes() == b""


def test_temp_files_a_killed_journal_write_left_are_removed_at_open(tmp_path: Path) -> None:
    root, data = tmp_path / "root", tmp_path / "data"
    (data / "journal").mkdir(parents=True)
    root.mkdir()
    tmp = data / "journal" / ".j-0123456789abcdef.json.x7y8z9.tmp"
    tmp.write_text("a full copy of a memory file")
    trim_tmp = data / ".history.jsonl.q1w2e3.tmp"
    trim_tmp.write_text("a half-written trim")
    with capture_logs() as logs:
        recover_edits(hist.History.in_data_dir(data), RootMap([root]))
    assert not tmp.exists() and not trim_tmp.exists()
    assert any(e["event"] == "journal.temp_removed" and e["path"] == str(tmp) for e in logs)


# -- one bound across both rings -------------------------------------------------------------------


def test_an_undo_and_the_record_it_undid_leave_the_history_together(tmp_path: Path) -> None:
    """#38, 12: the owner's undo of a peer's reinforcement is trimmed from the owner's ring: the
    reinforcement must not become undoable again (it went with it)."""
    h = hist.History(tmp_path / "history.jsonl", max_bytes=8_000, agents_max_bytes=1_000_000)
    peer = h.append(hist.entry(hist.REINFORCE, tmp_path, "peers/p/x.md", 1, old="x", new="y",
                               session={"kind": "direct", "peer": "p"}))
    h.append(hist.entry(hist.UNDO, tmp_path, "peers/p/x.md", 1, undoes=peer["id"], session={"kind": "owner"}))
    assert h.find(peer["id"]).get("undone_by")  # type: ignore[union-attr]
    for i in range(200):  # the owner's own work pushes the undo out of the owner's ring
        h.append(hist.entry(hist.FORGET, tmp_path, "MEMORY.md", i, old=f"owner entry {i} " * 3))
    found = hist.History(tmp_path / "history.jsonl").find(peer["id"])
    assert found is None or found.get("undone_by"), "an undone reinforcement is undoable again"


# -- who may write the data dir --------------------------------------------------------------------


@pytest.mark.parametrize(("where", "mode"), [(".", 0o775), (".", 0o757), ("journal", 0o777), ("journal", 0o720)])
def test_a_data_dir_others_can_write_is_refused_naming_the_fix(tmp_path: Path, where: str, mode: int) -> None:
    data = tmp_path / "data"
    (data / "journal").mkdir(parents=True)
    os.chmod(data / where, mode)
    folder = (data / where) if where != "." else data
    with pytest.raises(UnsafeDataDir, match=f"chmod 700 {folder}"):
        check_data_dir(data)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another uid needs root")
def test_a_data_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    os.chown(data, 4242, 4242)
    with pytest.raises(UnsafeDataDir, match="owned by uid 4242"):
        check_data_dir(data)


def test_a_data_dir_others_can_only_read_is_still_a_warning(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    assert check_data_dir(data) == []


def test_purge_removes_a_records_texts_for_good(tmp_path: Path) -> None:
    secret = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1"
    h = hist.History(tmp_path / "history.jsonl")
    rec = h.append(hist.entry(hist.FORGET, tmp_path, "MEMORY.md", 3, old=f"key {secret}", block=[f"- key {secret}"]))
    other = h.append(hist.entry(hist.FORGET, tmp_path, "MEMORY.md", 4, old="tea"))
    kept = h.purge(rec["id"])
    assert secret.encode() not in h.path.read_bytes() and kept["purged"] and kept["redacted"]
    fresh = hist.History(tmp_path / "history.jsonl")
    assert fresh.find(rec["id"])["path"] == "MEMORY.md" and fresh.find(other["id"])["old"] == "tea"  # type: ignore[index]
    with pytest.raises(EntryNotFound):
        h.purge("h-0000000000000000")
