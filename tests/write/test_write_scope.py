"""Dedup scoped by the route (issue #28 item 2): only the entries of the file and section the router
chose may be reinforced or replaced; a similar entry anywhere else is named in ``related`` and never
edited, and the answer names the file and line that changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.write.candidates import in_route
from memoryd.indexer.write.dedup import (
    APPEND,
    POSSIBLE_DUPLICATE,
    POSSIBLE_UPDATE,
    REINFORCE,
    REPLACE,
    Candidate,
    Thresholds,
    decide,
)
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config
from tests.write_fixtures import HASH_WRITE

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
TODAY = date(2026, 11, 26)
TH = Thresholds({"latin": 0.90, "cjk": 0.935, "cross": 0.83}, {"latin": 0.90, "cjk": 0.94, "cross": 0.805})
VIM, NEOVIM = "The user prefers Vim as their editor.", "The user prefers Neovim as their editor."
JOURNAL = "memory/2026-11-26.md"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[MemoryIndex, Path, MemoryWriter]]:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    index = open_index(cfg, HashEmbedder())
    try:
        yield index, root, MemoryWriter(index, root, cfg.write, clock=lambda: NOW)
    finally:
        index.close()


def plan(text: str, ns: Namespace = DEFAULT) -> Accepted:
    p = prepare(text, ns, TODAY)
    assert isinstance(p, Accepted), p
    return p


def put(index: MemoryIndex, root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    index.index_files([(root, rel)])


# -- the rule --------------------------------------------------------------------------------------


def test_an_entry_outside_the_route_is_flagged_never_reinforced_or_replaced() -> None:
    dup = Candidate("memory/2026-11-26.md", 3, NEOVIM, 0.99, scoped=False)
    upd = Candidate("memory/2026-11-26.md", 4, VIM, 0.97, scoped=False)
    v = decide(NEOVIM, [dup], TH)  # the same entry elsewhere in the scope: reinforced there (issue #37 item 2)
    assert (v.action, v.candidate) == (REINFORCE, dup)
    assert "already exists" in v.reason and NEOVIM not in v.reason  # reasons name places, never text
    restated = Candidate("memory/2026-11-26.md", 3, "The user likes Neovim best as their editor.", 0.99, scoped=False)
    v = decide(NEOVIM, [restated], TH)  # a restatement elsewhere: named, never edited
    assert (v.action, v.flag, v.candidate) == (APPEND, POSSIBLE_DUPLICATE, restated)
    assert "not edited" in v.reason
    v = decide(NEOVIM, [upd], TH)
    assert (v.action, v.flag, v.candidate) == (APPEND, POSSIBLE_UPDATE, upd)
    assert decide(NEOVIM, [dataclasses.replace(upd, scoped=True)], TH).action == REPLACE  # the same entry, in scope
    far = Candidate("notes.md", 1, "Deploys happen on Fridays.", 0.5, scoped=False)
    assert decide(NEOVIM, [far], TH).flag is None  # nothing similar: nothing to report


def test_the_route_s_own_entry_wins_and_the_one_elsewhere_is_reported_beside_it() -> None:
    mine = Candidate("user/preferences.md", 7, VIM, 0.97)
    other = Candidate(JOURNAL, 3, "The user likes Neovim best as their editor.", 0.99, scoped=False)
    v = decide(NEOVIM, [other, mine], TH)
    assert (v.action, v.candidate) == (REPLACE, mine)
    assert v.elsewhere is not None and (v.elsewhere.flag, v.elsewhere.candidate) == (POSSIBLE_DUPLICATE, other)
    twin = Candidate(JOURNAL, 3, NEOVIM, 0.99, scoped=False)  # the new text itself, elsewhere: never twice
    assert (decide(NEOVIM, [twin, mine], TH).action, decide(NEOVIM, [twin, mine], TH).candidate) == (REINFORCE, twin)
    same = Candidate("user/preferences.md", 7, NEOVIM, 0.99)
    v = decide(NEOVIM, [other, same], TH)
    assert (v.action, v.candidate) == (REINFORCE, same) and v.elsewhere is not None


def test_in_route_is_the_routed_section_or_the_entries_above_the_first_heading() -> None:
    text = ("# Memory\n\n- top item\n\n## Preferences\n\n- likes tea\n\n### Editors\n\n- uses vim\n\n"
            "## Current Focus\n\n- shipping\n")
    assert in_route(text, "Preferences") == {7, 11}  # sub-sections belong to their section
    assert in_route(text, "Current Focus") == {15}
    assert in_route(text, "Entities") == set()  # the file has its own headings; none is the route's
    assert in_route("- a\n- b\n\n## Other\n\n- c\n", "Preferences") == {1, 2}


# -- the writer ------------------------------------------------------------------------------------


def test_a_preference_never_rewrites_a_journal_line(env) -> None:
    index, root, w = env
    journal = f"# 2026-11-26\n\n- Talked about editors: {VIM}\n- {VIM}\n"
    put(index, root, JOURNAL, journal)
    out = w.remember(plan(NEOVIM))
    assert (out.decision, out.path) == ("appended", "user/preferences.md")
    assert (root / out.path).read_text().splitlines()[out.line - 1].startswith(f"- {NEOVIM}")
    assert (root / JOURNAL).read_text() == journal  # the journal is never edited
    assert out.related is not None
    assert (out.related["flag"], out.related["path"], out.related["line"], out.related["text"]) == (
        POSSIBLE_UPDATE, JOURNAL, 4, VIM)


def test_a_replace_names_the_line_it_changed_in_the_route_s_file(env) -> None:
    index, root, w = env
    journal = f"# 2026-11-26\n\n- Talked about editors: {VIM}\n"
    put(index, root, JOURNAL, journal)
    first = w.remember(plan(VIM))  # into user/preferences.md (the journal's line is only named)
    assert (first.decision, first.path) == ("appended", "user/preferences.md")
    out = w.remember(plan(NEOVIM))
    assert (out.decision, out.path, out.line, out.previous) == ("replaced", "user/preferences.md", first.line, VIM)
    assert (root / out.path).read_text().splitlines()[out.line - 1].startswith(f"- {NEOVIM}")
    assert (root / JOURNAL).read_text() == journal


def test_the_same_entry_in_another_file_of_the_scope_is_reinforced_there_not_written_twice(env) -> None:
    index, root, w = env
    memory = f"# Memory\n\n- {VIM}\n- The deploy window is Friday.\n"
    put(index, root, "MEMORY.md", memory)
    out = w.remember(plan(VIM.lower()))  # routed to user/preferences.md; the entry lives in MEMORY.md
    assert (out.decision, out.path, out.line) == ("reinforced", "MEMORY.md", 3)
    assert out.previous == VIM and out.history_id
    assert not (root / "user" / "preferences.md").exists()
    assert (root / "MEMORY.md").read_text().count(VIM) == 1


def test_an_exact_repeat_older_than_the_last_entries_of_a_big_file_is_reinforced(env) -> None:
    index, root, w = env
    rel = "user/preferences.md"
    facts = [f"- The user's favourite colour number {i} is shade {i * 7}." for i in range(320)]
    put(index, root, rel, "# Preferences\n\n" + "\n".join([f"- {VIM}", *facts]) + "\n")
    before = (root / rel).read_text()
    out = w.remember(plan(VIM))  # line 3, with 320 entries after it (max_file_entries is 300)
    assert (out.decision, out.path, out.line) == ("reinforced", rel, 3)
    after = (root / rel).read_text()
    assert after.count(VIM) == 1 and all(f in after for f in facts)  # nothing else replaced
    assert len(after.splitlines()) == len(before.splitlines())


def test_a_peer_s_other_section_is_not_edited(env) -> None:
    index, root, w = env
    rel = "peers/bob/MEMORY.md"
    text = f"# Bob\n\n## Current Focus\n\n- {VIM}\n"
    put(index, root, rel, text)
    out = w.remember(plan(NEOVIM, Namespace("peer", "bob")))
    assert (out.decision, out.path) == ("appended", rel)
    lines = (root / rel).read_text().splitlines()
    assert lines[4] == f"- {VIM}" and lines.index("## Preferences") < out.line - 1
    assert lines[out.line - 1].startswith(f"- {NEOVIM}")
    assert out.related is not None and (out.related["flag"], out.related["line"]) == (POSSIBLE_UPDATE, 5)
