"""Memory Bank flows, table-driven over fixture folders built in ``tmp_path``.

Every case checks the same contract: ``plan`` changes nothing; the plan has the
expected operations; ``apply`` yields the expected tree; every USER block that
existed before exists afterwards byte for byte; a second plan is empty and a
second apply changes no byte.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import pytest

from memoryd.indexer.bank import BankError, Move, apply_plan, detect, make_plan, plan_steps
from memoryd.indexer.markdown.memblocks import user_blocks

TODAY = date(2026, 1, 2)
USER = "<!-- USER_BLOCK_START -->\nMy notes 我的笔记 — keep.\n\n  trailing spaces   \n<!-- USER_BLOCK_END -->"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def all_user_blocks(root: Path) -> Counter[str]:
    return Counter(b for rel, data in tree(root).items() if rel.endswith(".md")
                   for b in user_blocks(data.decode("utf-8")))


def git(cwd: Path, *args: str) -> str:
    cfg = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]
    r = subprocess.run(["git", *cfg, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return r.stdout


# -- fixture folders ----------------------------------------------------------------------------------

def fresh(proj: Path) -> Path:
    write(proj, {"README.md": "# Widget service\n\nA small service that renders widgets.\n",
                 "pyproject.toml": '[project]\nname = "widgets"\nrequires-python = ">=3.11"\n'
                                   'dependencies = ["numpy>=1", "structlog"]\n'})
    return proj


def empty_bank(proj: Path) -> Path:
    fresh(proj)
    (proj / "memory-bank").mkdir()
    return proj / "memory-bank"  # PATH given as the memory-bank folder itself


V70 = ("# Memory\n<!-- MACHINE_BLOCK_START -->\n<!-- MEMORY_BANK_TEMPLATE:v7.0 -->\n## Project Snapshot\nx\n\n"
       "## Current Focus\nshipping\n\n## Routing Rules\n- tech: details/tech.md\n<!-- MACHINE_BLOCK_END -->\n\n"
       + USER + "\n")


def v70(proj: Path) -> Path:
    write(proj, {"memory-bank/MEMORY.md": V70, "memory-bank/details/tech.md": "# Tech\n",
                 "memory-bank/details/design/a.md": "# A\n"})
    return proj


def no_marker(proj: Path) -> Path:
    write(proj, {"memory-bank/MEMORY.md": "<!-- MACHINE_BLOCK_START -->\n## Project Snapshot\ny\n\n"
                 "## Drill-Down Protocol\nmine\n\n```\n## Write Safety Rules\n```\n<!-- MACHINE_BLOCK_END -->\n"
                 + USER + "\n"})
    return proj


LEGACY = {
    "memory-bank/_index.md": "# Index\n\n## Routing Rules\n\n- tech → tech.md\n",
    "memory-bank/brief.md": ("# Brief\n\n<!-- MACHINE_BLOCK_START -->\nWidget renderer for the web.\n\n"
                             "## Goals\n- fast\n<!-- MACHINE_BLOCK_END -->\n\n" + USER + "\n"),
    "memory-bank/active.md": "# Active\n\n- Working on caching\n",
    "memory-bank/tech.md": "# Tech\n\nPython\n",
    "memory-bank/patterns.md": ("# Patterns\n\n| 日期 | 决策 | 原因 |\n|---|---|---|\n"
                                "| 2026-01-01 | Use SQLite | simple |\n"),
    "memory-bank/docs/arch.md": "# Architecture\n",
    "memory-bank/docs/img.png": "PNG",
    "memory-bank/requirements/REQ-001.md": "# REQ-001: login\n",
    "memory-bank/learnings/bugs/cache.md": "# Cache bug\n",
    "memory-bank/notes.md": "loose notes\n",
}


def legacy(proj: Path) -> Path:
    write(proj, LEGACY)
    return proj


def legacy_git(proj: Path) -> Path:
    legacy(proj)
    write(proj, {"memory-bank/docs/untracked.md": "# Not committed\n"})
    git(proj, "init", "-q")
    git(proj, "add", "--", *LEGACY)
    git(proj, "commit", "-q", "-m", "old bank")
    return proj


def many_design(proj: Path) -> Path:
    fresh(proj)
    apply_plan(make_plan(proj, TODAY))
    write(proj, {f"memory-bank/details/design/d{i}.md": f"# Design {i}\n" for i in range(9)})
    return proj


# -- the table --------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    build: Callable[[Path], Path]
    case: str
    steps: list[str]  # every plan line must contain one of these, in this order, and no other lines
    present: list[str]
    absent: list[str] = field(default_factory=list)
    contains: dict[str, list[str]] = field(default_factory=dict)


INIT_STEPS = ["create folder memory-bank/details/", "create folder memory-bank/details/design/",
              "create folder memory-bank/details/requirements/", "create folder memory-bank/details/learnings/",
              "create memory-bank/details/tech.md", "create memory-bank/details/patterns.md",
              "create memory-bank/details/progress.md", "create memory-bank/MEMORY.md"]
SECTIONS = ["## Project Snapshot", "## Current Focus", "## Decision Highlights (Still Binding)",
            "## Routing Rules (Intent-Driven)", "## Drill-Down Protocol", "## Write Safety Rules",
            "## Top Quick Answers"]

CASES = [
    Case("fresh", fresh, "init", ["create folder memory-bank/", *INIT_STEPS],
         ["memory-bank/MEMORY.md", "memory-bank/details/tech.md", "memory-bank/details/patterns.md",
          "memory-bank/details/progress.md"],
         contains={"memory-bank/MEMORY.md": ["<!-- MEMORY_BANK_TEMPLATE:v7.1 -->", *SECTIONS,
                                             "Widget service — A small service that renders widgets."],
                   "memory-bank/details/tech.md": ["Python >=3.11", "numpy, structlog"]}),
    Case("existing empty memory-bank/ given directly", empty_bank, "init", INIT_STEPS, ["memory-bank/MEMORY.md"]),
    Case("v7.0", v70, "upgrade",
         ["update memory-bank/MEMORY.md: version marker v7.0 → v7.1",
          "append section ## Decision Highlights (Still Binding)", "append section ## Routing Rules (Intent-Driven)",
          "append section ## Drill-Down Protocol", "append section ## Write Safety Rules",
          "append section ## Top Quick Answers"],
         ["memory-bank/MEMORY.md"],
         contains={"memory-bank/MEMORY.md": ["## Routing Rules\n- tech: details/tech.md\n",
                                             "treat it as legacy", "glob `memory-bank/details/design/*.md`"]}),
    Case("missing marker", no_marker, "upgrade",
         ["insert version marker v7.1", "append section ## Current Focus", "append section ## Decision Highlights",
          "append section ## Routing Rules", "append section ## Write Safety Rules",
          "append section ## Top Quick Answers"],
         ["memory-bank/MEMORY.md"],
         contains={"memory-bank/MEMORY.md": ["<!-- MACHINE_BLOCK_START -->\n<!-- MEMORY_BANK_TEMPLATE:v7.1 -->\n",
                                             "## Drill-Down Protocol\nmine\n"]}),
    Case("legacy layout, no git", legacy, "migrate",
         ["create folder memory-bank/details/", "create folder memory-bank/details/design/",
          "create folder memory-bank/details/learnings/", "create folder memory-bank/details/learnings/bugs/",
          "create folder memory-bank/details/requirements/",
          "move memory-bank/docs/arch.md → memory-bank/details/design/arch.md",
          "move memory-bank/learnings/bugs/cache.md → memory-bank/details/learnings/bugs/cache.md",
          "move memory-bank/patterns.md → memory-bank/details/patterns.md",
          "move memory-bank/requirements/REQ-001.md → memory-bank/details/requirements/REQ-001.md",
          "move memory-bank/tech.md → memory-bank/details/tech.md",
          "create memory-bank/details/progress.md", "archive to memory-bank/legacy.md: _index.md, unclassified",
          "create memory-bank/MEMORY.md", "delete memory-bank/_index.md", "delete memory-bank/brief.md",
          "delete memory-bank/active.md", "remove empty folder memory-bank/learnings/bugs/",
          "remove empty folder memory-bank/learnings/", "remove empty folder memory-bank/requirements/"],
         ["memory-bank/MEMORY.md", "memory-bank/legacy.md", "memory-bank/details/tech.md",
          "memory-bank/details/design/arch.md", "memory-bank/docs/img.png", "memory-bank/notes.md"],
         absent=["memory-bank/_index.md", "memory-bank/brief.md", "memory-bank/active.md", "memory-bank/tech.md"],
         contains={"memory-bank/MEMORY.md": ["## Project Snapshot\n\nWidget renderer for the web.\n\n### Goals\n",
                                             "- Working on caching", "| Use SQLite | 2026-01-01 | simple |",
                                             "`memory-bank/legacy.md`"],
                   "memory-bank/legacy.md": ["## Legacy Routing (Topic)", "### Routing Rules\n\n- tech → tech.md",
                                             "`memory-bank/notes.md`", "`memory-bank/docs/img.png`"]}),
    Case("more than 8 design files", many_design, "refresh",
         ["create memory-bank/details/design/index.md",
          "update memory-bank/MEMORY.md: refresh the generated part of ## Routing Rules"],
         ["memory-bank/details/design/index.md"],
         contains={"memory-bank/details/design/index.md": ["- When modifying **Design 0**, read [d0.md](d0.md)"],
                   "memory-bank/MEMORY.md": ["`memory-bank/details/design/index.md`"]}),
]


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_flow(tmp_path: Path, c: Case) -> None:
    target = c.build(tmp_path / "proj")
    proj = tmp_path / "proj"
    before, blocks = tree(proj), all_user_blocks(proj)
    plan = make_plan(target, TODAY)
    assert tree(proj) == before, "plan changed files"
    assert plan.detection.case == c.case
    lines = plan_steps(plan)
    assert len(lines) == len(c.steps), "\n".join(lines)
    for line, want in zip(lines, c.steps, strict=True):
        assert want in line, f"{want!r} not in {line!r}"

    apply_plan(plan)
    after = tree(proj)
    for rel in c.present:
        assert rel in after, rel
    for rel in c.absent:
        assert rel not in after, rel
    for rel, needles in c.contains.items():
        text = after[rel].decode("utf-8")
        for n in needles:
            assert n in text, f"{n!r} not in {rel}"
    assert all(all_user_blocks(proj)[b] >= n for b, n in blocks.items()), "a USER block changed"
    outside = {k: v for k, v in before.items() if not k.startswith("memory-bank/")}
    assert {k: v for k, v in after.items() if not k.startswith("memory-bank/")} == outside

    again = make_plan(target, TODAY)
    assert again.detection.case == "refresh" and again.ops == (), plan_steps(again)
    apply_plan(again)
    assert tree(proj) == after, "second apply changed files"


def test_upgrade_keeps_user_block_bytes_and_everything_before_the_machine_end(tmp_path: Path) -> None:
    proj = v70(tmp_path / "proj")
    apply_plan(make_plan(proj, TODAY))
    text = (proj / "memory-bank/MEMORY.md").read_text(encoding="utf-8")
    assert user_blocks(text) == [USER]
    head = V70[: V70.index("<!-- MACHINE_BLOCK_END -->")].replace("v7.0", "v7.1")
    assert text.startswith(head)  # append-only: nothing before the insertion point moved
    assert text.endswith("<!-- MACHINE_BLOCK_END -->\n\n" + USER + "\n")


@pytest.mark.parametrize("broken", [
    "# M\n<!-- MACHINE_BLOCK_START -->\nno end marker\n",
    "# M\n<!-- MACHINE_BLOCK_START -->\n## Project Snapshot\n<!-- MACHINE_BLOCK_END -->\n",  # no USER block
    "<!-- MACHINE_BLOCK_END -->\n<!-- MACHINE_BLOCK_START -->\n" + USER + "\n",
    "<!-- MACHINE_BLOCK_START -->\n<!-- MACHINE_BLOCK_END -->\n<!-- USER_BLOCK_START -->\nunclosed\n",
])
def test_broken_block_markers_refuse_and_change_nothing(tmp_path: Path, broken: str) -> None:
    write(tmp_path, {"memory-bank/MEMORY.md": broken})
    det = detect(tmp_path)
    assert det.case == "upgrade" and det.problems
    with pytest.raises(BankError, match=r"MEMORY.md: cannot upgrade: .*Fix the block markers by hand"):
        make_plan(tmp_path, TODAY)
    assert (tmp_path / "memory-bank/MEMORY.md").read_text(encoding="utf-8") == broken


def test_migration_inside_git_uses_git_mv_for_tracked_files(tmp_path: Path) -> None:
    proj = legacy_git(tmp_path / "proj")
    plan = make_plan(proj, TODAY)
    moves = {op.src: op.git for op in plan.ops if isinstance(op, Move)}
    assert moves["tech.md"] is True and moves["docs/arch.md"] is True
    assert moves["docs/untracked.md"] is False  # git refuses to mv an untracked file: plain rename
    apply_plan(plan)
    staged = git(proj, "diff", "--cached", "-M", "--name-status")
    assert "R100\tmemory-bank/tech.md\tmemory-bank/details/tech.md" in staged
    assert "R100\tmemory-bank/docs/arch.md\tmemory-bank/details/design/arch.md" in staged
    assert (proj / "memory-bank/details/design/untracked.md").read_text() == "# Not committed\n"
    assert not (proj / "memory-bank/brief.md").exists()
    assert make_plan(proj, TODAY).ops == ()


def test_migration_outside_git_does_plain_renames(tmp_path: Path) -> None:
    proj = legacy(tmp_path / "proj")
    plan = make_plan(proj, TODAY)
    assert all(not op.git for op in plan.ops if isinstance(op, Move))
    apply_plan(plan)
    assert not (proj / ".git").exists()
    assert (proj / "memory-bank/details/patterns.md").read_text(encoding="utf-8") == LEGACY["memory-bank/patterns.md"]
