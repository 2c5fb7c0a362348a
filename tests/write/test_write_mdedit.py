"""Markdown edits never lose a byte of the user's text: line endings, final newline, BOM, CJK, USER blocks."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.memblocks import BlockError, user_blocks

NOW = datetime(2025, 3, 1, 12, 30, 0, tzinfo=UTC)
USER = "<!-- USER_BLOCK_START -->\n## Preferences\n- mine, hands off\n\n  odd   spacing\t\n<!-- USER_BLOCK_END -->\n"


def lines_kept(before: str, after: str) -> bool:
    """Every line of ``before`` (with its terminator) appears in ``after``, in order.

    The one allowed change: an unterminated last line gains the file's newline when
    lines are added after it (and the new last line is then unterminated).
    """
    old = MdLines(before).lines
    if old and old[-1][1] == "":
        old[-1][1] = MdLines(before).newline
    new = MdLines(after).lines
    if new and new[-1][1] == "":
        new[-1][1] = MdLines(after).newline
    it = iter(new)
    return all(any(x == y for y in it) for x in old)


def test_exact_round_trip_of_odd_files() -> None:
    for text in ["", "a", "a\n", "a\r\nb\rc\n", "\ufeff# T\r\n\r\n- x", "x\n\n\n", "中文\r\n"]:
        assert MdLines(text).text() == text


def test_append_into_existing_section_keeps_crlf_and_missing_final_newline() -> None:
    text = "# Notes\r\n\r\n## Preferences\r\n- Tea in the morning\r\n\r\n## Other\r\nprose"
    e = mdedit.append(text, "Preferences", 2, "Dark mode everywhere", NOW, "f.md")
    assert e.text == ("# Notes\r\n\r\n## Preferences\r\n- Tea in the morning\r\n- Dark mode everywhere\r\n\r\n"
                      "## Other\r\nprose")
    assert e.line == 5 and lines_kept(text, e.text)


def test_append_creates_the_section_at_the_end_without_adding_a_final_newline() -> None:
    text = "# 记忆\n\n- 用户住在里斯本。"
    e = mdedit.append(text, "Preferences", 2, "用户偏好深色模式。", NOW, "f.md")
    assert e.text == "# 记忆\n\n- 用户住在里斯本。\n\n## Preferences\n\n- 用户偏好深色模式。"
    assert e.line == 7
    e2 = mdedit.append(text + "\n", "Preferences", 2, "用户偏好深色模式。", NOW, "f.md")
    assert e2.text.endswith("- 用户偏好深色模式。\n")


def test_append_under_an_empty_section_separates_it_from_prose() -> None:
    text = "## Decisions\nWe keep a log here.\n"
    e = mdedit.append(text, "decisions", 2, "Chose Redis.", NOW, "f.md")  # titles match case-insensitively
    assert e.text == "## Decisions\n\n- Chose Redis.\n\nWe keep a log here.\n"
    assert lines_kept(text, e.text)


def test_user_block_sections_and_entries_are_never_used() -> None:
    text = "# Memory\n\n" + USER
    e = mdedit.append(text, "Preferences", 2, "Dark mode everywhere", NOW, "f.md")
    assert user_blocks(e.text) == user_blocks(text)
    assert e.text == text + "\n## Preferences\n\n- Dark mode everywhere\n"
    assert [t for _, t in mdedit.entries(text)] == []
    assert mdedit.replace(text, "mine, hands off", 4, "changed", NOW, "f.md") is None
    assert mdedit.reinforce(text, "mine, hands off", 4, NOW, "f.md") is None
    assert mdedit.remove(text, 4, None, NOW, "f.md") is None


def test_machine_block_receives_the_writes() -> None:
    text = ("<!-- MACHINE_BLOCK_START -->\n# Auto\n<!-- MACHINE_BLOCK_END -->\n\n" + USER)
    e = mdedit.append(text, "Preferences", 2, "Dark mode everywhere", NOW, "f.md")
    assert e.text.startswith("<!-- MACHINE_BLOCK_START -->\n# Auto\n\n## Preferences\n\n- Dark mode everywhere\n\n"
                             "<!-- MACHINE_BLOCK_END -->\n")
    assert e.text.endswith(USER) and lines_kept(text, e.text)


@pytest.mark.parametrize("text", ["<!-- USER_BLOCK_START -->\n- a\n", "- a\n<!-- USER_BLOCK_END -->\n",
                                  "<!-- MACHINE_BLOCK_START -->\n- a\n"])
def test_broken_block_markers_refuse_every_edit(text: str) -> None:
    with pytest.raises(BlockError):
        mdedit.append(text, "X", 2, "entry", NOW, "f.md")


def test_reinforcement_is_counted_in_the_entry_marker_and_front_matter_only_dated() -> None:
    text = "---\ntitle: Prefs\nupdated: 2024-01-01\ntags: [a, b]\n---\n\n## Preferences\n\n- Dark mode\n- Vim\n"
    e = mdedit.reinforce(text, "dark mode", 9, NOW, "f.md")
    assert e is not None and e.reinforcement == 1 and e.line == 9 and e.entry == "Dark mode"
    assert e.text == text.replace("2024-01-01", "2025-03-01").replace(
        "- Dark mode\n", "- Dark mode <!-- memoryd: reinforced=1 -->\n")
    e2 = mdedit.reinforce(e.text, "Dark mode", 9, NOW, "f.md")
    assert e2 is not None and e2.reinforcement == 2 and "- Dark mode <!-- memoryd: reinforced=2 -->\n" in e2.text
    e3 = mdedit.reinforce(e2.text, "Vim", 10, NOW, "f.md")
    assert e3 is not None and e3.reinforcement == 1 and e3.text.count("reinforced=") == 2
    gone = mdedit.replace(e3.text, "Dark mode", 9, "Light mode", NOW, "f.md")
    assert gone is not None and gone.previous == "Dark mode"
    assert "- Light mode\n- Vim <!-- memoryd: reinforced=1 -->\n" in gone.text and "tags: [a, b]\n" in gone.text


def test_marker_is_not_part_of_the_entry_and_replace_keeps_importance() -> None:
    text = mdedit.append("# M\n", "Decisions", 2, "Use Postgres", NOW, "f.md", importance=5).text
    assert text.endswith("- Use Postgres <!-- memoryd: importance=5 -->\n")
    assert mdedit.entries(text) == [(5, "Use Postgres")]
    r = mdedit.reinforce(text, "use postgres", 5, NOW, "f.md")
    assert r is not None and r.text.endswith("- Use Postgres <!-- memoryd: importance=5 reinforced=1 -->\n")
    new = mdedit.replace(r.text, "Use Postgres", 5, "Use SQLite", NOW, "f.md")
    assert new is not None and new.text.endswith("- Use SQLite <!-- memoryd: importance=5 -->\n")


def test_legacy_front_matter_count_is_folded_into_the_marker() -> None:
    key = mdedit.entry_id("A fact here")
    text = f'---\nupdated: 2024-01-01T00:00:00Z\nreinforcement:\n  "{key}": 3\n---\n- A fact here\n'
    e = mdedit.reinforce(text, "A fact here", 5, NOW, "f.md")
    assert e is not None and e.reinforcement == 4
    assert e.text == "---\nupdated: 2025-03-01T12:30:00Z\n---\n- A fact here <!-- memoryd: reinforced=4 -->\n"


def test_iso_timestamp_scalar_counter_kept_and_no_front_matter_added() -> None:
    text = "---\nupdated: 2024-01-01T00:00:00Z\nreinforcement: 4\n---\n- A fact here\n"
    e = mdedit.reinforce(text, "A fact here", 5, NOW, "f.md")
    assert e is not None and e.reinforcement == 1
    assert e.text == ("---\nupdated: 2025-03-01T12:30:00Z\nreinforcement: 4\n---\n"
                      "- A fact here <!-- memoryd: reinforced=1 -->\n")
    plain = "# Memory\n\n- A fact here\n"
    r = mdedit.reinforce(plain, "A fact here", 3, NOW, "f.md")
    assert r is not None and r.text == "# Memory\n\n- A fact here <!-- memoryd: reinforced=1 -->\n"
    assert r.reinforcement == 1


def test_replace_keeps_marker_and_drops_continuation_lines_only() -> None:
    text = "\ufeff  * [ ] Old fact\n    continued here\n  * Next fact\n"
    e = mdedit.replace(text, "Old fact", 1, "New fact", NOW, "f.md")
    assert e is not None and e.text == "\ufeff  * [ ] New fact\n  * Next fact\n" and e.line == 1
    assert e.previous == "Old fact"


def test_entries_skip_code_fences_and_front_matter() -> None:
    text = "---\n- not an entry: yaml\n---\n- real\n```\n- code, not an entry\n```\n1. numbered\n"
    assert mdedit.entries(text) == [(4, "real"), (8, "numbered")]


def test_remove_keeps_a_missing_final_newline_missing_and_checks_expected_text() -> None:
    text = "- keep me\n- drop me"
    assert mdedit.remove(text, 2, "something else", NOW, "f.md") is None
    e = mdedit.remove(text, 2, "Drop me.", NOW, "f.md")  # folded comparison
    assert e is not None and e.text == "- keep me" and e.previous == "drop me"
    assert mdedit.remove(text, 3, None, NOW, "f.md") is None


def test_entries_are_found_by_text_near_the_hint() -> None:
    text = "- same\n- other\n- same\n"
    e = mdedit.replace(text, "same", 3, "changed", NOW, "f.md")
    assert e is not None and e.text == "- same\n- other\n- changed\n"


_FRAGMENTS = ["# T", "## Preferences", "## Decisions", "- item one", "- 第二条", "prose line", "", "  indented",
              "```", "- in fence?", "<!-- USER_BLOCK_START -->\n- user item\n<!-- USER_BLOCK_END -->", "1. num",
              "## preferences", "> quote", "\ufeffbom?"]


@pytest.mark.parametrize("seed", range(60))
def test_random_files_keep_every_line_and_every_user_block(seed: int) -> None:
    rng = random.Random(seed)
    nl = rng.choice(["\n", "\r\n", "\r"])
    text = nl.join(rng.choice(_FRAGMENTS).replace("\n", nl) for _ in range(rng.randint(0, 14)))
    text += rng.choice(["", nl])
    e = mdedit.append(text, rng.choice(["Preferences", "Decisions", "New"]), 2, "新的 entry", NOW, "f.md")
    assert lines_kept(text, e.text), (text, e.text)
    assert user_blocks(e.text) == user_blocks(text)
    assert MdLines(e.text).lines[e.line - 1][0] == "- 新的 entry"
    assert e.text.endswith(nl) == text.endswith(nl) or text == ""
    ents = mdedit.entries(e.text)
    line, old = ents[rng.randrange(len(ents))]
    r = mdedit.replace(e.text, old, line, "replaced", NOW, "f.md")
    assert r is not None and user_blocks(r.text) == user_blocks(text)
    assert len(MdLines(r.text).lines) <= len(MdLines(e.text).lines)


def test_undoing_a_reinforcement_takes_the_count_back_and_writes_the_absorbed_text() -> None:
    text = "# M\n\n- Use Postgres <!-- memoryd: importance=5 reinforced=2 -->\n"
    e = mdedit.insert_after(text, "Use Postgres", 3, "We use PostgreSQL", NOW, "f.md")
    assert e.text == "# M\n\n- Use Postgres <!-- memoryd: importance=5 reinforced=1 -->\n- We use PostgreSQL\n"


def test_forget_expecting_the_text_as_a_hit_shows_it_with_its_marker() -> None:
    text = "# M\n\n- Use Postgres <!-- memoryd: importance=5 -->\n- Keep\n"
    e = mdedit.remove(text, 3, "Use Postgres <!-- memoryd: importance=5 -->", NOW, "f.md")
    assert e is not None and e.text == "# M\n\n- Keep\n" and e.previous == "Use Postgres"
    assert mdedit.remove(text, 3, "Use MySQL", NOW, "f.md") is None
