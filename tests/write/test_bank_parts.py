"""Memory Bank building blocks: scan budget, sections, refresh rules, guards, index upkeep, detection."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from memoryd.indexer.bank import BankApplyError, BankError, Delete, apply_plan, detect, make_plan, plan_steps
from memoryd.indexer.bank.guards import added_secret, checked_path
from memoryd.indexer.bank.legacy import decision_rows
from memoryd.indexer.bank.routing import maintain_index
from memoryd.indexer.bank.scan import CANDIDATES, MAX_FILES, MAX_LINES, scan_project
from memoryd.indexer.bank.sections import demote_headings, find_section, generated_region, wrap_generated
from memoryd.indexer.markdown.memblocks import user_blocks
from tests.write.test_bank_flows import TODAY, USER, fresh, v70, write

# -- scan ----------------------------------------------------------------------------------------------------


def test_scan_reads_at_most_ten_files(tmp_path: Path) -> None:
    for name in CANDIDATES:
        (tmp_path / name).write_text("x\n")
    (tmp_path / "README.md").write_text("# Big\n\nSummary here.\n")
    snap = scan_project(tmp_path)
    assert len(snap.sources) == MAX_FILES
    assert snap.sources[0] == "README.md" and "README.rst" not in snap.sources  # one README only
    assert snap.name == "Big" and snap.summary == "Summary here."


def test_scan_reads_at_most_200_lines_per_file(tmp_path: Path) -> None:
    filler = "\n".join("# Title" if i == 0 else "" for i in range(MAX_LINES + 5))
    (tmp_path / "README.md").write_text(filler + "\nToo late to be read.\n")
    (tmp_path / "package.json").write_text('{\n  "name": "pkg",\n  "description": "Cut" ' + "\n" * 300 + "}")
    snap = scan_project(tmp_path)
    assert snap.name == "Title" and snap.summary == "Cut"  # JSON cut by the budget falls back to line matching
    assert "Too late" not in snap.summary


def test_scan_of_an_empty_project_still_yields_a_snapshot(tmp_path: Path) -> None:
    write(tmp_path, {"memory-bank/.keep.md": ""})
    apply_plan(make_plan(tmp_path, TODAY))
    text = (tmp_path / "memory-bank/MEMORY.md").read_text()
    assert "(project name not found)" in text and "no README or manifest found" in text


# -- sections ------------------------------------------------------------------------------------------------


def test_find_section_ignores_fences_and_user_blocks() -> None:
    text = ("```\n## Top Quick Answers\n```\n<!-- USER_BLOCK_START -->\n## Drill-Down Protocol\n"
            "<!-- USER_BLOCK_END -->\n## Drill-Down Protocolx\n")
    assert find_section(text, ["## Top Quick Answers"]) is None
    assert find_section(text, ["## Drill-Down Protocol"]) is None  # exact heading match only


def test_generated_region_detects_hand_edits() -> None:
    text = "## S\n\n" + wrap_generated("a\n") + "## T\n"
    start, end = find_section(text, ["## S"]) or (0, 0)
    assert end == text.index("## T")
    region = generated_region(text, start, end)
    assert region is not None and region[2] and text[region[0]:region[1]] == "a\n"
    edited = text.replace("a\n", "b\n")
    region = generated_region(edited, start, end)
    assert region is not None and not region[2]


def test_demote_headings_skips_code_fences() -> None:
    assert demote_headings("# A\n```\n# not\n```\n## B\n") == "## A\n```\n# not\n```\n### B\n"


# -- refresh -------------------------------------------------------------------------------------------------


def test_refresh_rewrites_a_generated_snapshot_when_the_readme_changes(tmp_path: Path) -> None:
    proj = fresh(tmp_path)
    apply_plan(make_plan(proj, TODAY))
    (proj / "README.md").write_text("# Gadget service\n\nNow it renders gadgets.\n")
    plan = make_plan(proj, TODAY)
    assert plan_steps(plan) == ["update memory-bank/MEMORY.md: refresh the generated part of ## Project Snapshot"]
    apply_plan(plan)
    text = (proj / "memory-bank/MEMORY.md").read_text()
    assert "Gadget service — Now it renders gadgets." in text and "Widget" not in text
    assert make_plan(proj, TODAY).ops == ()


def test_refresh_keeps_a_hand_edited_generated_part(tmp_path: Path) -> None:
    proj = fresh(tmp_path)
    apply_plan(make_plan(proj, TODAY))
    mem = proj / "memory-bank/MEMORY.md"
    mem.write_text(mem.read_text().replace("A small service", "My own words about a service"))
    (proj / "README.md").write_text("# Changed\n\nChanged.\n")
    before = mem.read_bytes()
    plan = make_plan(proj, TODAY)
    assert plan.ops == () and any("edited by hand" in n for n in plan.notes)
    apply_plan(plan)
    assert mem.read_bytes() == before


def test_refresh_appends_a_missing_routing_section_and_touches_nothing_else(tmp_path: Path) -> None:
    write(tmp_path, {"memory-bank/MEMORY.md": "<!-- MACHINE_BLOCK_START -->\n<!-- MEMORY_BANK_TEMPLATE:v7.1 -->\n"
                     "## Project Snapshot\nmine\n<!-- MACHINE_BLOCK_END -->\n" + USER + "\n"})
    plan = make_plan(tmp_path, TODAY)
    assert plan_steps(plan) == ["update memory-bank/MEMORY.md: append section ## Routing Rules (Intent-Driven)"]
    apply_plan(plan)
    text = (tmp_path / "memory-bank/MEMORY.md").read_text()
    assert "## Project Snapshot\nmine\n" in text and "## Current Focus" not in text
    assert user_blocks(text) == [USER]


# -- guards --------------------------------------------------------------------------------------------------


def test_a_secret_in_an_old_entry_file_stops_the_migration(tmp_path: Path) -> None:
    write(tmp_path, {"memory-bank/brief.md": "# Brief\n\napi_key = sk-abcdefghijklmnopqrstuvwxyz0123\n"})
    with pytest.raises(BankError, match=r"MEMORY.md: refusing to write: .*brief.md.* contains an API key") as exc:
        make_plan(tmp_path, TODAY)
    assert "sk-abc" not in str(exc.value)  # never echo the secret
    assert sorted(p.name for p in (tmp_path / "memory-bank").iterdir()) == ["brief.md"]


def test_only_new_secrets_count() -> None:
    old = "token: ghp_" + "a" * 36 + "\n"
    assert added_secret(old, old + "more\n") is None
    assert added_secret("", "password = hunter2hunter2\n") == "contains a password/token/key assignment"
    assert added_secret("", "staging host db.internal\n") is None  # network names are not secrets here
    assert added_secret("", USER.replace("keep.", "password = hunter2hunter2")) is None  # USER blocks are the user's


def test_upgrade_is_not_blocked_by_a_secret_already_in_the_file(tmp_path: Path) -> None:
    write(tmp_path, {"memory-bank/MEMORY.md": "<!-- MACHINE_BLOCK_START -->\npassword = hunter2hunter2\n"
                     "<!-- MACHINE_BLOCK_END -->\n" + USER})
    apply_plan(make_plan(tmp_path, TODAY))
    assert "MEMORY_BANK_TEMPLATE:v7.1" in (tmp_path / "memory-bank/MEMORY.md").read_text()


def test_checked_path_refuses_non_markdown_and_escapes(tmp_path: Path) -> None:
    bank = tmp_path / "memory-bank"
    (bank / "details").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", bank / "details" / "link")
    with pytest.raises(BankError, match=r"only \.md"):
        checked_path(bank, "details/x.txt")
    with pytest.raises(BankError, match="outside"):
        checked_path(bank, "../x.md")
    with pytest.raises(BankError, match="outside"):
        checked_path(bank, "details/link/x.md")
    assert checked_path(bank, "details/ok.md") == bank / "details" / "ok.md"


def test_apply_stops_if_the_file_changed_after_the_plan(tmp_path: Path) -> None:
    proj = v70(tmp_path)
    plan = make_plan(proj, TODAY)
    mem = proj / "memory-bank/MEMORY.md"
    mem.write_text(mem.read_text() + "a line the user just saved\n")
    with pytest.raises(BankApplyError, match="changed since the plan") as exc:
        apply_plan(plan)
    assert exc.value.done == ()
    assert mem.read_text().endswith("a line the user just saved\n")


def test_apply_refuses_a_delete_outside_a_migration(tmp_path: Path) -> None:
    proj = v70(tmp_path)
    plan = make_plan(proj, TODAY)
    forged = dataclasses.replace(plan, ops=(Delete("MEMORY.md", "0" * 64),))
    with pytest.raises(BankApplyError, match="refusing to delete"):
        apply_plan(forged)
    assert (proj / "memory-bank/MEMORY.md").exists()


def test_migration_refuses_to_move_onto_an_existing_file(tmp_path: Path) -> None:
    write(tmp_path, {"memory-bank/brief.md": "# B\n", "memory-bank/tech.md": "# old\n",
                     "memory-bank/details/tech.md": "# new\n"})
    with pytest.raises(BankError, match=r"tech.md: cannot move it to memory-bank/details/tech.md"):
        make_plan(tmp_path, TODAY)


# -- index upkeep and legacy mapping -------------------------------------------------------------------------


def test_maintain_index_keeps_table_style_and_user_lines() -> None:
    text = ("# Design\n\n| Path | Title |\n|---|---|\n| [a.md](a.md) | A |\n| [gone.md](gone.md) | G |\n\n"
            "<!-- USER_BLOCK_START -->\n- see [gone.md](gone.md)\n<!-- USER_BLOCK_END -->\n")
    new, changes = maintain_index(text, "design", {"a.md": "A", "b.md": "B"})
    assert [(c.kind, c.detail) for c in changes] == [("remove_entry", "gone.md"), ("add_entry", "b.md")]
    assert "| [a.md](a.md) | A |\n| [b.md](b.md) | B |\n\n" in new and "| [gone.md]" not in new
    assert user_blocks(new) == user_blocks(text)
    assert maintain_index(new, "design", {"a.md": "A", "b.md": "B"}) == (new, [])


def test_decision_rows_fall_back_to_bold_items_then_headings() -> None:
    assert decision_rows("- **Use Redis**: cache\n", "p") == ["| Use Redis | – | cache |"]
    assert decision_rows("# P\n\n## Pick Go\n\ntext\n", "p.md") == ["| Pick Go | – | see `p.md` |"]
    many = "".join(f"- **D{i}**: r\n" for i in range(30))
    assert len(decision_rows(many, "p")) == 20


# -- detection -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("memory", "case", "version"), [
    ("<!-- MEMORY_BANK_TEMPLATE:v8.0 -->", "refresh", "v8.0"),
    ("<!-- MEMORY_BANK_TEMPLATE:v7.1 -->", "refresh", "v7.1"),
    ("<!-- MEMORY_BANK_TEMPLATE:v6.9 -->", "upgrade", "v6.9"),
    ("<!-- USER_BLOCK_START -->\n<!-- MEMORY_BANK_TEMPLATE:v7.1 -->\n<!-- USER_BLOCK_END -->", "upgrade", None),
])
def test_detect_reads_the_version_marker(tmp_path: Path, memory: str, case: str, version: str | None) -> None:
    write(tmp_path, {"memory-bank/MEMORY.md": memory + "\n", "memory-bank/brief.md": "# old\n"})
    det = detect(tmp_path / "memory-bank")
    assert (det.case, det.to_json()["version"]) == (case, version)
    assert any("brief.md are also present" in r for r in det.reasons)


def test_detect_needs_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f.md").write_text("x")
    with pytest.raises(BankError, match="not a folder"):
        detect(tmp_path / "f.md")
    assert detect(tmp_path).case == "init"
