"""Write-ahead history: the old bytes are durable before any memory file changes, every undo works.

The crash tests stop a write at each step (:data:`memoryd.indexer.write.writer.STEPS`) by raising
from the writer's step seam — everything the writer keeps is on disk (fsynced files, no buffers),
so what is left is what a SIGKILL at that instant leaves — then run the start-up recovery and check
that no entry was lost or duplicated. ``tests/e2e/test_write_chaos.py`` does the same with real SIGKILLs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import recover_edits
from memoryd.daemon.roots import RootMap
from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import WriteConflict
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.patch import Patch
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.editor import MemoryEditor
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.journal import EditJournal, FileEdit, Intent
from memoryd.indexer.write.recovery import recover
from memoryd.indexer.write.writer import STEPS
from tests.helpers import make_config
from tests.write_fixtures import HASH_WRITE

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
LATER = datetime(2025, 3, 2, 10, 30, tzinfo=UTC)


class Crash(BaseException):
    """Stands for a SIGKILL: nothing after it runs (not an Exception, so no handler swallows it)."""


@dataclasses.dataclass
class Env:
    root: Path
    data: Path
    index: MemoryIndex
    history: hist.History
    crash_at: str | None = None

    def editor(self, clock: datetime = NOW) -> MemoryEditor:
        def step(name: str) -> None:
            if name == self.crash_at:
                self.crash_at = None
                raise Crash(name)

        return MemoryEditor(self.index, self.root, self.cfg_write, clock=lambda: clock, history=self.history,
                            at_step=step)

    cfg_write: Any = None

    def restart(self) -> dict[str, int]:
        """What a new daemon does first: settle the journal (a fresh History, as after a restart)."""
        self.history = hist.History.in_data_dir(self.data)
        return recover_edits(self.history, RootMap([self.root]))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    root, data = tmp_path / "root", tmp_path / "data"
    (root / "user").mkdir(parents=True)
    cfg = make_config(root, data)
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    data.mkdir(parents=True, exist_ok=True)
    index = open_index(cfg, HashEmbedder())
    e = Env(root, data, index, hist.History.in_data_dir(data), cfg_write=cfg.write)
    try:
        yield e
    finally:
        index.close()


def plan(text: str, ns: Namespace = DEFAULT) -> Accepted:
    p = prepare(text, ns, date(2025, 3, 1))
    assert isinstance(p, Accepted), p
    return p


def entries_of(root: Path) -> list[str]:
    """Every entry's text in every memory file under ``root`` (sorted: a multiset to compare)."""
    out = []
    for f in sorted(root.rglob("*.md")):
        out += [e.text for e in MdLines(f.read_text(encoding="utf-8")).entries]
    return sorted(out)


def recorded_old(h: hist.History) -> list[str]:
    """The entries the history keeps: what forgets and replaces removed (and was not put back), and what an
    undo took out again (the new entry of a replace it reverted)."""
    undone = {r["id"] for r in h.recent(limit=10**6) if r.get("undone_by")}
    return sorted(str(r["old"]) for r in h.records() if r.get("old") is not None and (
        r["action"] == hist.UNDO or (r["action"] in (hist.FORGET, hist.REPLACE) and r["id"] not in undone)))


# -- byte-for-byte undo -------------------------------------------------------------------


CRLF_UNDER_LF = ("---\nupdated: 2024-01-01\ntitle: notes\n---\r\n# Alice\r\n\r\n"
                 "- Alice likes green tea.\r\n- Alice works nights.\r\n  (since May)\r\n\r\nSome prose.\r\n")


def test_clear_and_its_undo_are_byte_identical_front_matter_and_crlf_included(env: Env) -> None:
    f = env.root / "peers" / "alice" / "notes.md"
    f.parent.mkdir(parents=True)
    f.write_bytes(CRLF_UNDER_LF.encode())
    g = env.root / "peers" / "alice" / "more.md"
    g.write_bytes(b"# More\n\n- Alice plays chess.\n- Alice has a cat")  # no final newline
    before = {p: p.read_bytes() for p in (f, g)}
    ns = Namespace("peer", "alice")
    out = env.editor().clear(ns, ["peers/alice/more.md", "peers/alice/notes.md"])
    assert out["removed"] == 4 and out["files"] == 2
    assert b"updated: 2025-03-01" in f.read_bytes() and b"Alice" not in g.read_bytes()
    back = env.editor(LATER).undo(out["history_id"])
    assert back.decision == "restored" and "4 entries restored in 2 file(s)" in back.reason
    assert {p: p.read_bytes() for p in (f, g)} == before
    with pytest.raises(WriteConflict):
        env.editor().undo(out["history_id"])  # undone once only
    forgets = [r for r in env.history.recent() if r["action"] == "forget"]
    assert len(forgets) == 4 and all(r.get("undone_by") for r in forgets)  # the clear's undo covers them


def test_forget_and_replace_undo_byte_for_byte_with_crlf(env: Env) -> None:
    f = env.root / "MEMORY.md"
    f.write_bytes(CRLF_UNDER_LF.replace("alice", "memory").encode())
    before = f.read_bytes()
    out = env.editor().forget("MEMORY.md", 7)
    assert b"Alice likes green tea" not in f.read_bytes()
    env.editor(LATER).undo(out.history_id)  # type: ignore[arg-type]
    assert f.read_bytes() == before


def test_undo_after_a_hand_edit_places_the_entry_by_its_neighbours(env: Env) -> None:
    f = env.root / "MEMORY.md"
    f.write_text("# Memory\n\n## Food\n\n- Likes tea.\n- Likes miso soup.\n- Likes figs.\n\n"
                 "## Work\n\n- Works nights.\n")
    out = env.editor().forget("MEMORY.md", 6)
    # The user writes a paragraph at the top: the old line 6 is now inside it.
    f.write_text(f.read_text().replace("# Memory\n\n", "# Memory\n\nA paragraph the user wrote,\nthree lines long,\n"
                                       "that must stay whole.\n\n"))
    env.editor(LATER).undo(out.history_id)  # type: ignore[arg-type]
    assert f.read_text() == ("# Memory\n\nA paragraph the user wrote,\nthree lines long,\nthat must stay whole.\n\n"
                             "## Food\n\n- Likes tea.\n- Likes miso soup.\n- Likes figs.\n\n"
                             "## Work\n\n- Works nights.\n")


def test_undo_that_cannot_be_placed_changes_nothing_and_keeps_the_record(env: Env) -> None:
    f = env.root / "MEMORY.md"
    f.write_text("# Memory\n\n- Likes tea.\n- Likes miso soup.\n- Likes figs.\n")
    out = env.editor().forget("MEMORY.md", 4)
    f.write_text("# Something else entirely\n\n- Unrelated.\n")  # every neighbour is gone
    with pytest.raises(WriteConflict, match="cannot be placed safely"):
        env.editor().undo(out.history_id)  # type: ignore[arg-type]
    assert f.read_text() == "# Something else entirely\n\n- Unrelated.\n"
    assert not env.history.find(out.history_id).get("undone_by")  # type: ignore[arg-type, union-attr]
    f.write_text("# Memory\n\n- Likes tea.\n- Likes figs.\n")  # the neighbours are back: now it can
    env.editor().undo(out.history_id)  # type: ignore[arg-type]
    assert f.read_text() == "# Memory\n\n- Likes tea.\n- Likes miso soup.\n- Likes figs.\n"


def test_a_forgotten_secret_stays_restorable_and_the_listing_redacts_it(env: Env) -> None:
    from memoryd.daemon.api.history import shown

    secret = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1"
    f = env.root / "MEMORY.md"
    f.write_text(f"# Memory\n\n- The bot key is {secret} for now.\n- build01.corp.lan runs CI.\n- Tea at four.\n")
    before = f.read_text()
    a = env.editor().forget("MEMORY.md", 3)
    b = env.editor().forget("MEMORY.md", 3)
    assert secret in env.history.path.read_text()  # the record keeps the exact bytes (0600, never indexed)
    listed = json.dumps([shown(r) for r in env.history.recent()])
    assert secret not in listed and "build01.corp.lan" not in listed and "REDACTED" in listed
    env.editor().undo(b.history_id)  # type: ignore[arg-type]
    env.editor().undo(a.history_id)  # type: ignore[arg-type]
    assert f.read_text() == before


def test_update_section_and_undo_are_byte_identical(env: Env) -> None:
    f = env.root / "MEMORY.md"
    text = "---\nupdated: 2024-01-01\n---\n# Memory\n\n## Current Focus\r\n\r\nShip v2.\r\nHost 10.0.0.7 is build.\r\n"
    f.write_bytes(text.encode())
    out = env.editor().update_section("MEMORY.md", "Current Focus", "Write the docs.")
    assert out.decision == "updated"
    env.editor(LATER).undo(out.history_id)  # type: ignore[arg-type]
    assert f.read_bytes() == text.encode()


# -- bounds -------------------------------------------------------------------------------


def test_confined_sessions_cannot_flush_the_owners_records(tmp_path: Path) -> None:
    h = hist.History(tmp_path / "history.jsonl", max_bytes=20_000)
    mine = h.append(hist.entry(hist.FORGET, tmp_path, "MEMORY.md", 3, old="owner's", block=["- owner's"],
                               session={"kind": "owner"}))
    for i in range(3000):  # 150 peer ids x 20 writes each
        h.append(hist.entry(hist.REINFORCE, tmp_path, f"peers/p{i % 150}/x.md", 1, old="x" * 40, new=f"y{i}",
                            session={"kind": "direct", "peer": f"p{i % 150}"}))
    assert h.find(mine["id"]) is not None
    sizes = h.sizes()
    assert sizes["agents"]["bytes"] <= 20_000 and sizes["owner"]["records"] == 1


def test_repeated_reinforcements_of_the_same_text_add_no_record(env: Env) -> None:
    f = env.root / "user/preferences.md"
    f.write_text("## Preferences\n\n- The user prefers window seats on long flights.\n")
    env.index.index_files([(env.root, "user/preferences.md")])
    ids = {env.editor().remember(plan("the user prefers window seats on long flights")).history_id for _ in range(5)}
    assert len(ids) == 1 and len([r for r in env.history.records() if r["action"] == "reinforce"]) == 1
    assert "reinforced=5" in f.read_text()


# -- the journal ------------------------------------------------------------------------


def _intent(root: Path, files: list[FileEdit], n: int = 1) -> Intent:
    return Intent.new(root, files, [hist.entry(hist.FORGET, root, files[0].rel, 1, old=f"e{i}") for i in range(n)])


@pytest.mark.parametrize(("state", "outcome", "kept"), [("after", "completed", 1), ("before", "not_started", 0),
                                                        ("other", "kept", 0)])
def test_recover_settles_a_single_file_edit(tmp_path: Path, state: str, outcome: str, kept: int) -> None:
    root, journal = tmp_path / "root", EditJournal(tmp_path / "data" / "journal")
    root.mkdir()
    fe = FileEdit("a.md", "- one\n- two\n", "- one\n")
    (root / "a.md").write_text({"after": fe.after, "before": fe.before, "other": "- three\n"}[state])
    intent = _intent(root, [fe])
    journal.begin(intent)
    got: list[dict[str, Any]] = []
    counts = recover(journal, lambda r, rel: Path(r) / rel, got.extend)
    assert counts[outcome] == 1 and len(got) == kept and list(journal.pending()) == []
    assert (root / "a.md").read_text() == {"after": fe.after, "before": fe.before, "other": "- three\n"}[state]


def test_recover_finishes_a_multi_file_edit_cut_half_way_and_sets_aside_a_torn_journal(tmp_path: Path) -> None:
    root, journal = tmp_path / "root", EditJournal(tmp_path / "data" / "journal")
    root.mkdir()
    a, b = FileEdit("a.md", "- 1\n", ""), FileEdit("b.md", "- 2\n", "")
    (root / "a.md").write_text(a.after)
    (root / "b.md").write_text(b.before or "")
    journal.begin(_intent(root, [a, b], 2))
    (journal.folder / "j-0000000000000000.json").write_text('{"id": "j-0", "fi')
    got: list[dict[str, Any]] = []
    counts = recover(journal, lambda r, rel: Path(r) / rel, got.extend)
    assert {k: n for k, n in counts.items() if n} == {"finished": 1, "unreadable": 1}
    assert (root / "b.md").read_text() == "" and len(got) == 2
    assert [p.name for p in journal.folder.iterdir()] == ["j-0000000000000000.bad"]


def test_the_patch_of_a_file_without_a_final_newline_round_trips() -> None:
    old, new = "a\r\nb\nc", "a\r\nc"
    p = Patch.between(old, new)
    assert p.revert(new) == (old, True)
    assert Patch.from_json(json.loads(json.dumps(p.to_json()))) == p


# -- a crash at every step of every edit -----------------------------------------------------


def _seed(env: Env) -> None:
    (env.root / "MEMORY.md").write_text("---\nupdated: 2024-01-01\n---\n# Memory\n\n## Current Focus\n\nShip v2.\n\n"
                                        "## Notes\n\n- The office is in Lisbon.\n- Tea is served at four.\n")
    (env.root / "user" / "preferences.md").write_text("# Preferences\n\n- The user prefers Vim as their editor.\n")
    alice = env.root / "peers" / "alice"
    alice.mkdir(parents=True)
    (alice / "a.md").write_text("# Alice\n\n" + "".join(f"- Alice fact number {i}.\n" for i in range(30)))
    (alice / "b.md").write_text("# Alice 2\n\n" + "".join(f"- Alice detail number {i}.\n" for i in range(20)))
    env.index.index_files([(env.root, p.relative_to(env.root).as_posix()) for p in env.root.rglob("*.md")])


def _undoable(env: Env, action: str) -> str:
    """Make one record of ``action`` (no crash) and return its id, for the undo crash case."""
    ed = env.editor()
    if action == "clear":
        return str(ed.clear(Namespace("peer", "alice"), ["peers/alice/a.md", "peers/alice/b.md"])["history_id"])
    if action == "forget":
        return str(ed.forget("MEMORY.md", 12).history_id)
    return str(ed.remember(plan("The user prefers Neovim as their editor.")).history_id)


EDITS: dict[str, Callable[[MemoryEditor], Any]] = {
    "forget": lambda ed: ed.forget("MEMORY.md", 12),
    "replace": lambda ed: ed.remember(plan("The user prefers Neovim as their editor.")),
    "reinforce": lambda ed: ed.remember(plan("the user prefers vim as their editor")),
    "clear": lambda ed: ed.clear(Namespace("peer", "alice"), ["peers/alice/a.md", "peers/alice/b.md"]),
    "update_section": lambda ed: ed.update_section("MEMORY.md", "Current Focus", "Write the docs."),
    "promote": lambda ed: ed.promote("peers/alice/a.md", 3, DEFAULT, date(2025, 3, 1)),
    "import": lambda ed: ed.import_plans([(1, plan("The user prefers Neovim as their editor.")),
                                          (2, plan("The office moved to Porto last spring."))], dry_run=False),
}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("action", [*EDITS, "undo-clear", "undo-forget", "undo-replace"])
def test_a_crash_at_any_step_loses_and_duplicates_nothing(env: Env, action: str, step: str) -> None:
    _seed(env)
    undo_of = _undoable(env, action.split("-", 1)[1]) if action.startswith("undo-") else None
    files_before = {p: p.read_bytes() for p in env.root.rglob("*.md")}
    known = set(entries_of(env.root)) | set(recorded_old(env.history))
    env.crash_at = step
    with pytest.raises(Crash):
        if undo_of is not None:
            env.editor().undo(undo_of)
        else:
            EDITS[action](env.editor())
    counts = env.restart()
    assert sum(counts.values()) == 1  # exactly the interrupted edit was settled
    now, saved = entries_of(env.root), recorded_old(env.history)
    # Nothing lost: every entry is still in a file or restorable from the history.
    assert known <= set(now) | set(saved)
    # Nothing duplicated: no entry twice in the files, no record twice in the history.
    assert len(now) == len(set(now))
    ids = [r["id"] for r in env.history.records()]
    assert len(ids) == len(set(ids))
    if step == "journaled":  # the file was never touched
        assert {p: p.read_bytes() for p in env.root.rglob("*.md")} == files_before
    # The history and the files agree: an undo of the last record (when the edit had one) works.
    last = env.history.recent(limit=1)
    if step != "journaled" and last and last[0]["action"] not in ("undo", "reinforce") and not last[0].get("undone_by"):
        env.editor().undo(last[0]["id"] if last[0]["action"] != "clear" else last[0]["group"])


def test_a_write_whose_index_step_fails_is_still_a_write_and_says_so(env: Env, monkeypatch) -> None:
    from memoryd.indexer.errors import StoreError

    def down(files: Any, **kw: Any) -> Any:
        raise StoreError("database is locked")

    monkeypatch.setattr(env.index, "index_files", down)
    out = env.editor().remember(plan("The deploy window moved to Tuesday mornings."))
    assert out.decision == "appended" and out.indexed is False and "database is locked" in (out.index_note or "")
    assert "Tuesday mornings" in (env.root / out.path).read_text()
    monkeypatch.undo()
    again = env.editor().forget(out.path, out.line)
    assert again.indexed is None and again.to_dict().get("indexed") is None  # indexed: nothing to say


def test_an_edit_larger_than_half_the_bound_keeps_all_its_own_records(tmp_path: Path) -> None:
    h = hist.History(tmp_path / "history.jsonl", max_bytes=30_000)
    h.extend([hist.entry(hist.FORGET, tmp_path, "old.md", 1, old=f"old {i}" * 20) for i in range(50)])
    big = [hist.entry(hist.FORGET, tmp_path, "a.md", i, old=f"entry {i} " * 30, reason="clear") for i in range(120)]
    h.extend(big)  # ~30 KB at once: past the bound, and more than the half a trim keeps
    assert [r["id"] for r in h.records()][-120:] == [r["id"] for r in big]
