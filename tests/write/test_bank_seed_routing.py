"""Seed 002's write table in a root that holds a Memory Bank (issue #28 item 3).

* a technical decision goes to Decision Highlights **and** ``details/patterns.md``, in one
  write-ahead edit of both files: a kill between the two is finished at the next start;
* every route lands inside ``memory-bank/`` (instructions and preferences in ``details/user.md``,
  entities in ``details/entities.md``, the journal in ``details/journal/``); nothing outside it changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memoryd.daemon.app import recover_edits
from memoryd.daemon.roots import RootMap
from memoryd.indexer.access import DEFAULT
from memoryd.indexer.bank import apply_plan, make_plan
from memoryd.indexer.bank import highlights as hl
from memoryd.indexer.config import WriteConfig
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.markdown.memblocks import user_blocks
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.journal import EditJournal
from memoryd.indexer.write.router import BANK, TYPES, route
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config
from tests.write.test_bank_flows import fresh
from tests.write_fixtures import HASH_WRITE

TODAY = date(2025, 3, 1)
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
MEMORY = "memory-bank/MEMORY.md"
PATTERNS = "memory-bank/details/patterns.md"
DECISION = "We decided to use Redis for session storage."


class Crash(BaseException):
    """Stands for a SIGKILL at a write-ahead step (nothing after it runs)."""


@dataclasses.dataclass
class Bank:
    root: Path
    data: Path
    index: MemoryIndex
    write_cfg: WriteConfig
    crash_at: str | None = None

    def writer(self, before_write: Callable[[Path], None] | None = None) -> MemoryWriter:
        def step(name: str) -> None:
            if name == self.crash_at:
                self.crash_at = None
                raise Crash(name)

        return MemoryWriter(self.index, self.root, self.write_cfg, clock=lambda: NOW,
                            history=hist.History.in_data_dir(self.data), at_step=step, before_write=before_write)

    def remember(self, text: str, memory_type: str | None = None, w: MemoryWriter | None = None) -> dict[str, object]:
        p = prepare(text, DEFAULT, TODAY, memory_type, bank=True)
        assert isinstance(p, Accepted), p
        return (w or self.writer()).remember(p).to_dict()

    def files(self) -> dict[str, bytes]:
        return {str(f.relative_to(self.root)): f.read_bytes() for f in sorted(self.root.rglob("*")) if f.is_file()}


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    root = fresh(tmp_path / "proj")
    apply_plan(make_plan(root, TODAY))
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    index = open_index(cfg, HashEmbedder())
    try:
        yield Bank(root, tmp_path / "data", index, cfg.write)
    finally:
        index.close()


@pytest.mark.parametrize("memory_type", TYPES)
def test_every_type_routes_inside_the_memory_bank(memory_type: str) -> None:
    r = route("Something worth keeping for later on.", TODAY, memory_type, layout=BANK)
    assert r.target.startswith("memory-bank/") and r.target.endswith(".md"), r


def test_instructions_preferences_entities_and_journal_change_nothing_outside_the_bank(bank: Bank) -> None:
    before = bank.files()
    outside = {k: v for k, v in before.items() if not k.startswith("memory-bank/")}
    expected = {
        "Always run the full test suite before merging.": ("instruction", "memory-bank/details/user.md"),
        "The user prefers dark mode in every editor.": ("preference", "memory-bank/details/user.md"),
        "Alice Chen leads the payments team.": ("entity", "memory-bank/details/entities.md"),
        "Had lunch with the whole team at the new place today.": ("journal",
                                                                  "memory-bank/details/journal/2025-03-01.md"),
    }
    for text, (kind, path) in expected.items():
        out = bank.remember(text)
        assert (out["decision"], out["path"]) == ("appended", path), (kind, out)
        assert text in (bank.root / path).read_text().splitlines()[int(str(out["line"])) - 1]
    after = bank.files()
    assert {k: v for k, v in after.items() if not k.startswith("memory-bank/")} == outside
    user = (bank.root / "memory-bank/details/user.md").read_text()
    assert user.index("## Instructions") < user.index("full test suite") < user.index("## Preferences") \
        < user.index("dark mode")
    apply_plan(make_plan(bank.root, TODAY))  # the next refresh routes to the new files
    rules = (bank.root / MEMORY).read_text()
    assert "| Follow the user's instructions and preferences | `memory-bank/details/user.md` |" in rules
    assert "`memory-bank/details/entities.md`" in rules and "memory-bank/details/journal/" in rules


def test_a_decision_goes_to_decision_highlights_and_patterns(bank: Bank) -> None:
    mem, patterns = bank.root / MEMORY, bank.root / PATTERNS
    users = user_blocks(mem.read_text())
    out = bank.remember(DECISION)
    assert (out["decision"], out["path"]) == ("appended", MEMORY)
    assert [hl.first_cell(r) for _, r in hl.rows(mem.read_text())] == [DECISION]
    ptext = patterns.read_text()
    assert ptext.count(DECISION) == 1
    also = out["also"]
    assert isinstance(also, list) and also[0]["path"] == PATTERNS
    assert ptext.splitlines()[also[0]["line"] - 1] == f"| 2025-03-01 | {DECISION} | — |"
    assert ptext.index("## Technical Decisions") < ptext.index(DECISION) < ptext.index("## Code Conventions")
    assert user_blocks(mem.read_text()) == users
    again = bank.remember(DECISION.lower())
    assert again["decision"] == "reinforced" and patterns.read_text() == ptext  # stated twice, recorded once


def test_a_decision_already_in_patterns_is_not_copied_there_again(bank: Bank) -> None:
    patterns = bank.root / PATTERNS
    row = f"| 2024-01-01 | {DECISION} | x |\n"
    patterns.write_text(patterns.read_text().replace("|---|---|---|\n", "|---|---|---|\n" + row))
    ptext = patterns.read_text()
    out = bank.remember(DECISION)
    assert out["decision"] == "appended" and "also" not in out
    assert patterns.read_text() == ptext and DECISION in (bank.root / MEMORY).read_text()


@pytest.mark.parametrize("step", ["journaled", "written"])
def test_a_kill_between_the_two_files_is_finished_at_the_next_start(bank: Bank, step: str) -> None:
    mem, patterns = bank.root / MEMORY, bank.root / PATTERNS
    before_mem, before_pat = mem.read_text(), patterns.read_text()
    bank.crash_at = step  # "written" fires after patterns.md, before MEMORY.md is replaced
    with pytest.raises(Crash):
        bank.remember(DECISION)
    assert mem.read_text() == before_mem  # the table was not touched yet
    assert (DECISION in patterns.read_text()) == (step == "written")  # patterns.md first: never lost
    counts = recover_edits(hist.History.in_data_dir(bank.data), RootMap([bank.root]))
    assert counts["finished" if step == "written" else "not_started"] == 1
    if step == "written":
        assert [hl.first_cell(r) for _, r in hl.rows(mem.read_text())] == [DECISION]
        assert patterns.read_text().count(DECISION) == 1
    else:
        assert (mem.read_text(), patterns.read_text()) == (before_mem, before_pat)
    assert list(EditJournal.in_data_dir(bank.data).pending()) == []
    out = bank.remember(DECISION)  # remembering it again finds it where the edit put it
    assert out["decision"] == ("reinforced" if step == "written" else "appended")
    assert patterns.read_text().count(DECISION) == 1 and mem.read_text().count(DECISION) == 1


def test_a_concurrent_edit_of_the_table_after_patterns_is_written_survives(bank: Bank) -> None:
    mem, patterns = bank.root / MEMORY, bank.root / PATTERNS
    note = "- a line the user typed meanwhile\n"
    seen: list[str] = []

    def meanwhile(path: Path) -> None:
        seen.append(path.name)
        if path == mem and seen.count("MEMORY.md") == 1:
            mem.write_text(mem.read_text().replace("<!-- USER_BLOCK_START -->\n", "<!-- USER_BLOCK_START -->\n" + note))

    out = bank.remember(DECISION, w=bank.writer(before_write=meanwhile))
    text = mem.read_text()
    assert note in text and [hl.first_cell(r) for _, r in hl.rows(text)] == [DECISION]
    assert out["line"] == hl.has_decision(text, DECISION)
    assert patterns.read_text().count(DECISION) == 1
    assert seen[:2] == ["patterns.md", "MEMORY.md"]  # patterns.md is written first
    assert list(EditJournal.in_data_dir(bank.data).pending()) == []
