"""``remember`` into a Memory Bank (docs/memory-bank.md, "Remembering into a Memory Bank"): the router's
bank layout, Current Focus and Decision Highlights inside the MACHINE block, details/ files, the 20-row
cap with overflow to details/patterns.md, and USER blocks left byte-identical."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.bank import apply_plan, make_plan
from memoryd.indexer.bank import highlights as hl
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import WriteConflict
from memoryd.indexer.markdown.memblocks import machine_span, user_blocks
from memoryd.indexer.search.query import Query
from memoryd.indexer.write.intake import Accepted, has_bank, prepare
from memoryd.indexer.write.router import BANK, route
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config
from tests.write.test_bank_flows import fresh
from tests.write_fixtures import HASH_WRITE

TODAY = date(2025, 3, 1)
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
MEMORY = "memory-bank/MEMORY.md"
USER_NOTE = "- my own note: never touch this\n"

TOOLS = ("Bazel", "Gradle", "Maven", "Ninja", "Meson", "Buck", "Pants", "Rake", "Grunt", "Gulp", "Webpack", "Rollup",
         "Parcel", "Vite", "Esbuild", "Turbopack", "Nx", "Lerna", "Cargo", "Poetry", "Hatch", "Flit", "Scons")
BANK_ROUTES = [
    ("The API must support pagination of every list.", "requirement", "memory-bank/details/requirements/notes.md"),
    ("需求：导出功能必须支持 CSV。", "requirement", "memory-bank/details/requirements/notes.md"),
    ("We are currently working on the auth rewrite.", "focus", MEMORY),
    ("下一步是把索引迁移到新格式。", "focus", MEMORY),
    ("We decided to use Redis for session storage.", "decision", MEMORY),
    ("We decided on the design of the cache layer.", "decision", MEMORY),
    ("The architecture splits the reader from the writer.", "design", "memory-bank/details/design/notes.md"),
    ("Root cause was a stale cache; the workaround is a restart.", "pattern",
     "memory-bank/details/learnings/notes.md"),
    ("Always run the full test suite before merging.", "instruction", "memory-bank/details/user.md"),
    ("The user prefers dark mode in every editor.", "preference", "memory-bank/details/user.md"),
    ("Alice Chen leads the payments team.", "entity", "memory-bank/details/entities.md"),
    ("Met the design team about the onboarding flow.", "design", "memory-bank/details/design/notes.md"),
    ("Had lunch with the team today.", "journal", "memory-bank/details/journal/2025-03-01.md"),
]


@pytest.mark.parametrize(("content", "kind", "target"), BANK_ROUTES)
def test_bank_layout_routes_to_the_memory_banks_own_places(content: str, kind: str, target: str) -> None:
    r = route(content, TODAY, layout=BANK)
    assert (r.memory_type, r.target) == (kind, target)
    assert r.highlights == (kind == "decision")


def test_only_the_owners_default_namespace_uses_the_bank() -> None:
    text = "We decided to use Redis for session storage."
    p = prepare(text, DEFAULT, TODAY, bank=True)
    assert isinstance(p, Accepted) and p.target == MEMORY
    for ns in (Namespace("agent", "coder"), Namespace("peer", "bob")):
        other = prepare(text, ns, TODAY, bank=True)
        assert isinstance(other, Accepted) and not other.target.startswith(f"{ns.folder}/memory-bank")
    plain = prepare(text, DEFAULT, TODAY)
    assert isinstance(plain, Accepted) and plain.target == "agent/decisions.md"


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[tuple[MemoryIndex, Path, MemoryWriter]]:
    root = fresh(tmp_path / "proj")
    apply_plan(make_plan(root, TODAY))
    mem = root / MEMORY
    mem.write_text(mem.read_text().replace("<!-- USER_BLOCK_START -->\n",
                                           "<!-- USER_BLOCK_START -->\n## Decision Highlights\n" + USER_NOTE))
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    index = open_index(cfg, HashEmbedder())
    try:
        yield index, root, MemoryWriter(index, root, cfg.write, clock=lambda: NOW)
    finally:
        index.close()


def remember(w: MemoryWriter, root: Path, text: str) -> tuple[str, str, int]:
    assert has_bank(root)
    p = prepare(text, DEFAULT, TODAY, bank=True)
    assert isinstance(p, Accepted), p
    out = w.remember(p)
    return out.decision, out.path, out.line


def inside_machine(text: str, line: int) -> bool:
    span = machine_span(text)
    assert span is not None
    offset = sum(len(x) for x in text.splitlines(keepends=True)[: line - 1])
    return span[0] < offset < span[1]


def test_focus_and_decisions_land_inside_the_machine_block_and_user_blocks_stay(bank) -> None:
    _index, root, w = bank
    mem = root / MEMORY
    before = user_blocks(mem.read_text())
    decision, path, line = remember(w, root, "We are currently working on the auth rewrite.")
    text = mem.read_text()
    assert (decision, path) == ("appended", MEMORY) and inside_machine(text, line)
    focus = "- We are currently working on the auth rewrite. <!-- memoryd: importance=4 -->"
    assert text.splitlines()[line - 1] == focus
    assert text.index("## Current Focus") < text.index("auth rewrite") < text.index("## Decision Highlights (Still")

    decision, path, line = remember(w, root, "We decided to use Redis for session storage.")
    text = mem.read_text()
    assert (decision, path) == ("appended", MEMORY) and inside_machine(text, line)
    assert text.splitlines()[line - 1] == "| We decided to use Redis for session storage. | 2025-03-01 | — |"
    assert text.splitlines()[line - 2].startswith("|---")  # the template's empty table got its first row
    assert remember(w, root, "we decided to use redis for session storage")[0] == "reinforced"
    assert len(hl.rows(text)) == 1 and user_blocks(mem.read_text()) == before
    assert USER_NOTE in mem.read_text()


def test_details_files_are_created_with_their_sections(bank) -> None:
    index, root, w = bank
    _, path, line = remember(w, root, "The architecture splits the reader from the writer.")
    assert path == "memory-bank/details/design/notes.md"
    text = (root / path).read_text()
    assert "## Design notes\n" in text and "splits the reader" in text.splitlines()[line - 1]
    hits = index.query(Query("architecture reader writer", mode="keyword")).to_json()["hits"]
    assert hits[0]["path"] == path and hits[0]["importance"] == 3


def test_decision_highlights_keep_20_rows_and_overflow_moves_to_patterns(bank) -> None:
    _index, root, w = bank
    mem, patterns = root / MEMORY, root / "memory-bank/details/patterns.md"
    before = user_blocks(mem.read_text())
    pattern_text = patterns.read_text()
    for tool in TOOLS:
        assert remember(w, root, f"We decided to adopt {tool} for the build.")[0] == "appended"
    text = mem.read_text()
    kept = [hl.first_cell(r) for _, r in hl.rows(text)]
    assert kept == [f"We decided to adopt {tool} for the build." for tool in TOOLS[3:]] and len(kept) == hl.MAX_ROWS
    moved = patterns.read_text()
    table = "| Date | Decision | Reason |\n|---|---|---|\n"
    rows = "".join(f"| 2025-03-01 | We decided to adopt {tool} for the build. | — |\n" for tool in TOOLS)
    assert moved == pattern_text.replace(table, table + rows)  # every decision, once, in the table; nothing else
    assert user_blocks(text) == before and USER_NOTE in text


def test_overflow_already_copied_is_not_copied_twice_with_or_without_a_table() -> None:
    row = "| Use Postgres | 2025-01-01 | billing needs transactions |"
    assert hl.history_item(row) == "Use Postgres (2025-01-01) — billing needs transactions"
    once = hl.add_history(None, [row], NOW, "p.md")  # no patterns.md yet: a list under the history section
    assert once is not None and once.text.count("Use Postgres") == 1 and f"## {hl.HISTORY_SECTION}" in once.text
    assert hl.add_history(once.text, [row], NOW, "p.md") is None
    table = "## Technical Decisions\n\n| Date | Decision | Reason |\n|---|---|---|\n| 2024-01-01 | Old | x |\n"
    into = hl.add_history(table, [row], NOW, "p.md")
    assert into is not None and into.text.endswith(
        "| 2024-01-01 | Old | x |\n| 2025-01-01 | Use Postgres | billing needs transactions |\n")
    assert hl.add_history(into.text, [row], NOW, "p.md") is None


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_remember_over_the_socket_uses_the_bank_only_for_the_owner(wd) -> None:
    first = wd.client.call("remember", {"content": "We decided to use Redis for session storage."})
    assert first["path"] == "agent/decisions.md"  # no Memory Bank yet
    apply_plan(make_plan(wd.root, TODAY))
    out = wd.client.call("remember", {"content": "We decided to ship the CLI as a single binary."})
    assert (out["decision"], out["path"], out["type"]) == ("appended", MEMORY, "decision")
    assert out["section"] == "Decision Highlights (Still Binding)"
    assert "single binary. |" in (wd.root / MEMORY).read_text().splitlines()[out["line"] - 1]
    assert out["also"] == [{"path": "memory-bank/details/patterns.md", "line": out["also"][0]["line"]}]
    hits = wd.client.call("search", {"query": "single binary CLI", "mode": "keyword"})["hits"]
    assert {h["path"] for h in hits} >= {MEMORY, "memory-bank/details/patterns.md"}  # both re-indexed before
    peer = wd.client.call("remember", {"content": "We decided to meet on Tuesdays from now on.",
                                       "session": {"kind": "direct", "peer": "bob"}})
    assert peer["path"] == "peers/bob/MEMORY.md"


def test_a_bank_without_decision_highlights_refuses_a_decision_and_changes_nothing(bank) -> None:
    _index, root, w = bank
    mem = root / MEMORY
    text = mem.read_text().replace("## Decision Highlights (Still Binding)", "## Old Decisions")
    mem.write_text(text)
    with pytest.raises(WriteConflict, match="bank apply"):
        remember(w, root, "We decided to use Redis for session storage.")
    assert mem.read_text() == text
