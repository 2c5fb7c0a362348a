"""The pure parts of memory management: section bodies, entry listing, paging, stats, export/import formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.errors import EntryNotFound, WriteConflict
from memoryd.indexer.markdown.memblocks import user_blocks
from memoryd.indexer.markdown.sections import SectionRefused, check_allowed, replace_body, restore_body
from memoryd.indexer.write.entries import file_entries, memory_files, page, select, stats
from memoryd.indexer.write.transfer import BadLine, ImportItem, parse_jsonl, to_jsonl, to_markdown

BANK = ("# Active\n\n<!-- MACHINE_BLOCK_START -->\n## Current Focus\n\n- old focus\n- second\n\n## Next Steps\n\n"
        "- step one\n<!-- MACHINE_BLOCK_END -->\n\n<!-- USER_BLOCK_START -->\n## Current Focus\n- mine\n"
        "<!-- USER_BLOCK_END -->\n")


# -- sections ---------------------------------------------------------------------------


def test_replace_body_changes_only_the_body_and_undo_restores_it() -> None:
    edit = replace_body(BANK, "current focus", "- ship export\n- then import\n\n", "a.md")
    assert "## Current Focus\n\n- ship export\n- then import\n\n## Next Steps" in edit.text
    assert "old focus" not in edit.text and user_blocks(edit.text) == user_blocks(BANK)
    assert edit.line == 4 and edit.old == ("", "- old focus", "- second", "")
    back = restore_body(edit.text, "Current Focus", edit.new, edit.old, "a.md")
    assert back.text == BANK


def test_restore_refuses_a_body_edited_after_the_update() -> None:
    edit = replace_body(BANK, "Current Focus", "- new", "a.md")
    edited = edit.text.replace("- new", "- the user's own line")
    with pytest.raises(WriteConflict, match="changed after the update"):
        restore_body(edited, "Current Focus", edit.new, edit.old, "a.md")


def test_section_holding_a_user_block_is_refused() -> None:
    text = "## Progress\n\n- done\n<!-- USER_BLOCK_START -->\nkeep me\n<!-- USER_BLOCK_END -->\n- more\n"
    with pytest.raises(SectionRefused) as e:
        replace_body(text, "Progress", "- all new", "p.md")
    assert e.value.rule == "user_block"


def test_a_section_only_inside_a_user_block_is_not_found() -> None:
    text = "# T\n<!-- USER_BLOCK_START -->\n## Progress\n- mine\n<!-- USER_BLOCK_END -->\n"
    with pytest.raises(EntryNotFound, match="no section 'Progress'"):
        replace_body(text, "Progress", "- x", "p.md")


@pytest.mark.parametrize("body", ["## Other\n- x", "<!-- USER_BLOCK_START -->", "# Top"])
def test_unsafe_bodies_are_refused(body: str) -> None:
    with pytest.raises(SectionRefused) as e:
        replace_body(BANK, "Next Steps", body, "a.md")
    assert e.value.rule == "body"


def test_deeper_headings_are_allowed_in_a_body() -> None:
    assert "### Detail" in replace_body(BANK, "Next Steps", "### Detail\n- x", "a.md").text


def test_whitelist_is_case_insensitive_and_names_what_is_allowed() -> None:
    assert check_allowed(" current focus ", ("Current Focus",)) == "current focus"
    with pytest.raises(SectionRefused, match=r"write\.sections allows 'Current Focus'") as e:
        check_allowed("Decisions", ("Current Focus",))
    assert e.value.rule == "write.sections"


# -- entries ------------------------------------------------------------------------------


def _root(tmp_path: Path) -> Path:
    files = {
        "user/preferences.md": "---\nupdated: 2026-02-01T10:00:00Z\nreinforcement:\n  \"%s\": 3\n---\n\n"
                               "## Preferences\n\n- Prefers tea.\n- Likes long walks\n  on Sundays.\n",
        "memory/2026-01-05.md": "# 2026-01-05\n\n- Met Bob about the launch.\n",
        "peers/alice/MEMORY.md": "## Decisions\n\n- Alice decided to use Go.\n\n## Journal\n\n- Chat on Monday.\n",
        "groups/dev/MEMORY.md": "- Standup at nine.\n",
        "notes/todo.md": "<!-- USER_BLOCK_START -->\n- user's own item\n<!-- USER_BLOCK_END -->\n- shared item\n",
    }
    from memoryd.indexer.markdown.mdedit import entry_id

    root = tmp_path / "root"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.replace("%s", entry_id("Prefers tea.")) if "%s" in text else text)
    return root


def test_entries_carry_type_dates_and_reinforcements(tmp_path: Path) -> None:
    root = _root(tmp_path)
    files = memory_files(root, None, lambda rel: True, 1 << 20)
    assert [f.rel for f in files] == ["groups/dev/MEMORY.md", "memory/2026-01-05.md", "notes/todo.md",
                                      "peers/alice/MEMORY.md", "user/preferences.md"]
    by_text = {e.text: e for f in files for e in file_entries(f)}
    tea, walks = by_text["Prefers tea."], by_text["Likes long walks"]
    assert (tea.type, tea.reinforcements, tea.updated, tea.namespace) == ("preference", 3, "2026-02-01T10:00:00Z",
                                                                          "default")
    assert (walks.start_line, walks.end_line, walks.reinforcements) == (10, 11, None)
    assert by_text["Met Bob about the launch."].type == "journal"
    assert by_text["Met Bob about the launch."].created == "2026-01-05"
    assert by_text["Alice decided to use Go."].type == "decision"
    assert by_text["Chat on Monday."].type == "journal"
    assert by_text["shared item"].type is None and "user's own item" not in by_text


def test_entry_markers_give_importance_and_count_on_top_of_older_front_matter(tmp_path: Path) -> None:
    from memoryd.indexer.markdown.mdedit import entry_id

    root = tmp_path / "root"
    (root / "user").mkdir(parents=True)
    (root / "user/preferences.md").write_text(
        f"---\nreinforcement:\n  \"{entry_id('Prefers tea.')}\": 2\n---\n\n"
        "- Prefers tea. <!-- memoryd: importance=4 -->\n- Uses Vim. <!-- memoryd: importance=2 reinforced=5 -->\n"
        "- Plain entry.\n")
    files = memory_files(root, None, lambda rel: True, 1 << 20)
    by_text = {e.text: e for f in files for e in file_entries(f)}
    assert (by_text["Prefers tea."].importance, by_text["Prefers tea."].reinforcements) == (4, 2)
    assert (by_text["Uses Vim."].importance, by_text["Uses Vim."].reinforcements) == (2, 5)
    assert (by_text["Plain entry."].importance, by_text["Plain entry."].reinforcements) == (None, None)


def test_namespace_selection_and_filters(tmp_path: Path) -> None:
    root = _root(tmp_path)
    default = memory_files(root, DEFAULT, lambda rel: True, 1 << 20)
    assert {f.rel for f in default} == {"memory/2026-01-05.md", "notes/todo.md", "user/preferences.md"}
    alice = memory_files(root, Namespace("peer", "alice"), lambda rel: True, 1 << 20)
    assert [f.rel for f in alice] == ["peers/alice/MEMORY.md"]
    assert memory_files(root, None, lambda rel: not rel.startswith("peers/"), 1 << 20)[-1].rel == "user/preferences.md"
    everything = memory_files(root, None, lambda rel: True, 1 << 20)
    assert [e.text for e in select(everything, memory_type="journal")] == ["Met Bob about the launch.",
                                                                          "Chat on Monday."]
    dated = [e.text for e in select(everything, since="2026-01-01", until="2026-01-31")]
    assert "Met Bob about the launch." in dated and "Prefers tea." not in dated


def test_pages_follow_the_cursor_and_end_with_none(tmp_path: Path) -> None:
    everything = memory_files(_root(tmp_path), None, lambda rel: True, 1 << 20)
    all_entries = list(select(everything))
    first, cursor = page(select(everything), None, 3)
    assert first == all_entries[:3] and cursor == f"{first[-1].path}:{first[-1].start_line}"
    rest, end = page(select(everything), cursor, 100)
    assert first + rest == all_entries and end is None
    with pytest.raises(ValueError, match="PATH:LINE"):
        page(select(everything), "nonsense", 3)


def test_stats_count_files_entries_and_bytes_per_namespace(tmp_path: Path) -> None:
    root = _root(tmp_path)
    per = stats(memory_files(root, None, lambda rel: True, 1 << 20))
    assert list(per) == ["default", "group:dev", "peer:alice"]
    assert per["peer:alice"] == {"files": 1, "entries": 2,
                                 "bytes": (root / "peers/alice/MEMORY.md").stat().st_size}
    assert per["default"]["entries"] == 4 and per["default"]["files"] == 3


# -- formats -------------------------------------------------------------------------------


def test_jsonl_export_imports_back_and_bad_lines_say_why(tmp_path: Path) -> None:
    everything = memory_files(_root(tmp_path), None, lambda rel: True, 1 << 20)
    text = to_jsonl(select(everything))
    items = parse_jsonl(text + "\nnot json\n[1]\n{\"text\": \"  \"}\n{\"content\": \"x\", \"type\": 3}\n")
    good = [i for i in items if isinstance(i, ImportItem)]
    assert [i.text for i in good] == [json.loads(line)["text"] for line in text.splitlines()]
    assert good[0].namespace == "group:dev"
    bad = [(b.line, b.reason.split(" (")[0]) for b in items if isinstance(b, BadLine)]
    n = len(text.splitlines())
    assert bad == [(n + 2, "not JSON"), (n + 3, "not a JSON object"), (n + 4, "no 'text'"),
                   (n + 5, "'type' must be a string")]


def test_markdown_bundle_holds_every_file_whole(tmp_path: Path) -> None:
    files = memory_files(_root(tmp_path), Namespace("peer", "alice"), lambda rel: True, 1 << 20)
    bundle = to_markdown(files)
    assert bundle.startswith("<!-- memoryd:file peers/alice/MEMORY.md (peer:alice) -->\n## Decisions")
    assert files[0].text in bundle
