"""memoryd's own v7.1 template text (English), with the v7.1 structure and headings (docs/memory-bank.md).

Every section builder returns ``"## Heading\\n\\n...body...\\n"``; callers join
sections with one blank line. Nothing here spells out a block marker inside
prose: a literal USER marker in a rule would open a USER block.
"""

from __future__ import annotations

from datetime import date

from memoryd.indexer.bank.scan import Snapshot
from memoryd.indexer.bank.sections import wrap_generated
from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, USER_END, USER_START

MARKER = "<!-- MEMORY_BANK_TEMPLATE:v7.1 -->"
TITLE = "# Project Memory\n"

SNAPSHOT = ("## Project Snapshot",)
FOCUS = ("## Current Focus",)
HIGHLIGHTS = ("## Decision Highlights (Still Binding)", "## Decision Highlights")
ROUTING = ("## Routing Rules (Intent-Driven)", "## Routing Rules（意图驱动）", "## Routing Rules (意图驱动)")
LEGACY_ROUTING = "## Routing Rules"
DRILL_DOWN = ("## Drill-Down Protocol",)
WRITE_SAFETY = ("## Write Safety Rules",)
QUICK_ANSWERS = ("## Top Quick Answers",)
ALL_SECTIONS = (SNAPSHOT, FOCUS, HIGHLIGHTS, ROUTING, DRILL_DOWN, WRITE_SAFETY, QUICK_ANSWERS)

LEGACY_NOTE = ("> If an older `## Routing Rules` section exists above, treat it as legacy: "
               "these intent-driven rules take precedence.\n\n")
HIGHLIGHTS_HEADER = "| Decision | Date | Binding constraint |\n|---|---|---|\n"


def snapshot_body(snap: Snapshot) -> str:
    """The generated part of Project Snapshot, from a project scan (deterministic for a given scan)."""
    what = snap.name or "(project name not found)"
    if snap.summary:
        what += f" — {snap.summary}"
    lines = [f"- **What**: {what}"]
    stack = list(dict.fromkeys(snap.stack))
    if stack:
        lines.append(f"- **Stack**: {', '.join(stack)}")
    lines.append("- **Scope**: this file keeps only what still shapes the current work; "
                 "the details live in `memory-bank/details/`.")
    pointers = [f"overview `{snap.readme}`"] if snap.readme else []
    pointers.append("tech stack `memory-bank/details/tech.md`")
    lines.append(f"- **Pointers**: {'; '.join(pointers)}")
    lines.append(f"- **Scanned**: {', '.join(snap.sources) if snap.sources else 'no README or manifest found'}")
    return "\n".join(lines) + "\n"


def snapshot_section(snap: Snapshot) -> str:
    return f"{SNAPSHOT[0]}\n\n{wrap_generated(snapshot_body(snap))}"


def focus_section(today: date, body: str | None = None) -> str:
    if body is None:
        body = ("- **Focus**: (nothing recorded yet)\n- **Next steps**:\n  - [ ] (next step)\n"
                "- **Blocked by**: nothing\n")
    return f"{FOCUS[0]}\n\n> Updated: {today.isoformat()}\n\n{body.rstrip()}\n"


def highlights_section(rows: list[str]) -> str:
    return (f"{HIGHLIGHTS[0]}\n\n> Only decisions that still bind the current implementation (keep 10–20). "
            "The full history is in `memory-bank/details/patterns.md`.\n\n"
            + HIGHLIGHTS_HEADER + "".join(r + "\n" for r in rows))


def drill_down_section() -> str:
    return (f"{DRILL_DOWN[0]}\n\n"
            "1. **Answer from this file first**; drill down along the Routing Rules only for evidence or detail.\n"
            "2. **Read 1–3 files under `memory-bank/details/` directly**, and stop once you have enough.\n"
            "3. **Widen the search** (`memoryd search`, or a glob over `memory-bank/details/**/*.md`) only for "
            "evidence chains, conflicts, or summaries across many files.\n"
            "4. **No guessing**: what you have not read, or what is not written down, is unknown.\n"
            "5. **Cite**: every answer names at least one file path it came from.\n")


def write_safety_section() -> str:
    return (f"{WRITE_SAFETY[0]}\n\n"
            "- Write only `.md` files, and only under `memory-bank/`; use structured write/edit tools, not shell "
            "redirection.\n"
            "- Propose first; write only after the user confirms.\n"
            "- Never write secrets: API keys, tokens, passwords, private keys, any credential, or customers' "
            "private data.\n"
            "- Never change a USER block: it belongs to the user, byte for byte.\n"
            "- Delete no file, except as the migration flow says.\n")


def quick_answers_section() -> str:
    return (f"{QUICK_ANSWERS[0]}\n\n"
            "> At most 8; each must be verifiable and name its file. Delete an answer when it goes stale.\n\n"
            "(none yet)\n")


def user_area(blocks: list[str] | None = None) -> str:
    """The USER part of a new MEMORY.md: the given USER blocks verbatim, else one empty block."""
    if blocks:
        return "\n".join(b.rstrip("\n") + "\n" for b in blocks)
    return f"{USER_START}\n## Notes\n\n{USER_END}\n"


def memory_md(sections: list[str], user: str) -> str:
    """A whole v7.1 MEMORY.md from its ``## `` sections (in order) and its USER area."""
    return f"{TITLE}\n{MACHINE_START}\n{MARKER}\n\n" + "\n".join(sections) + f"\n{MACHINE_END}\n\n{user}"


def detail_file(title: str, machine: str, user_heading: str = "## Notes") -> str:
    """A details/ file: title, MACHINE block with ``machine``, empty USER block (seed: every file has both)."""
    return (f"# {title}\n\n{MACHINE_START}\n{machine.rstrip()}\n{MACHINE_END}\n\n"
            f"{USER_START}\n{user_heading}\n\n{USER_END}\n")


def tech_md(snap: Snapshot) -> str:
    stack = ", ".join(dict.fromkeys(snap.stack)) or "(not detected)"
    deps = ", ".join(list(dict.fromkeys(snap.dependencies))[:20]) or "(not detected)"
    cmds = "".join(f"    {c}\n" for c in list(dict.fromkeys(snap.commands))[:15]) or "    (none detected)\n"
    body = (f"## Stack\n\n| Layer | Technology |\n|---|---|\n| Language / runtime | {_cell(stack)} |\n"
            f"| Main dependencies | {_cell(deps)} |\n\n## Commands\n\n{cmds}\n## Environment\n\n- (add requirements)\n")
    return detail_file("Tech Stack", body)


def patterns_md() -> str:
    return detail_file("Patterns & Decisions", "## Technical Decisions\n\n| Date | Decision | Reason |\n|---|---|---|\n"
                       "\n## Code Conventions\n\n- (none recorded yet)\n")


def progress_md() -> str:
    return detail_file("Progress", "## Done\n\n- (nothing yet)\n\n## In Progress\n\n- (nothing yet)\n\n"
                       "## To Do\n\n- (nothing yet)\n\n## Known Issues\n\n| ID | Issue | Priority |\n|---|---|---|\n")


def _cell(s: str) -> str:
    return s.replace("|", "\\|")
