"""Planning the migration (docs/memory-bank.md): an old-layout bank (``_index.md``/``brief.md``/``active.md``) to v7.1.

Order matters for a crash half-way: folders, then moves, then new details
files and indexes, then ``legacy.md``, then ``MEMORY.md`` (the commit point:
until it exists, detection still says "migrate" and a re-run picks up where
the last one stopped), and the three old entry files are deleted last.
Detail files move with ``git mv`` when the bank is in a git work tree and
the file is tracked. Nothing that cannot be classified is moved or deleted:
it stays where it is and ``legacy.md`` lists it. A legacy folder whose files
all moved is removed last (it is empty by then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from memoryd.indexer.bank import templates as tpl
from memoryd.indexer.bank.detect import LEGACY_ENTRIES, MEMORY, read_text
from memoryd.indexer.bank.gitops import in_work_tree, is_tracked
from memoryd.indexer.bank.guards import refuse_secrets
from memoryd.indexer.bank.indexes import index_ops, sha256_text
from memoryd.indexer.bank.layout import DETAILS, LEGACY, STANDARD_FILES, STANDARD_FOLDERS, Layout, read_layout
from memoryd.indexer.bank.legacy import decision_rows, section_body
from memoryd.indexer.bank.model import Archive, BankError, Create, Delete, Detection, Mkdir, Move, Op, Plan, Rmdir
from memoryd.indexer.bank.routing import routing_section
from memoryd.indexer.bank.scan import scan_project
from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, USER_END, USER_START, user_blocks

KNOWN_DIRS = {"docs": "design", "design": "design", "requirements": "requirements", "learnings": "learnings"}
_SKIP = {MEMORY, LEGACY, DETAILS, *LEGACY_ENTRIES}


@dataclass
class _Inventory:
    moves: list[tuple[str, str]] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)  # (path, why it stays)
    emptied: list[str] = field(default_factory=list)  # folders the moves leave empty, deepest first


def _inventory(bank: Path) -> _Inventory:
    inv = _Inventory()
    for entry in sorted(bank.iterdir()):
        name = entry.name
        if name.startswith(".") or name in _SKIP:
            continue
        if entry.is_file() and name in STANDARD_FILES:
            inv.moves.append((name, f"{DETAILS}/{name}"))
        elif entry.is_dir() and name in KNOWN_DIRS:
            _inventory_dir(bank, entry, inv)
        else:
            inv.left.append((f"{name}{'/' if entry.is_dir() else ''}", "not part of the v7.1 layout"))
    return inv


def _inventory_dir(bank: Path, folder: Path, inv: _Inventory) -> None:
    kept = len(inv.left)
    for f in sorted(p for p in folder.rglob("*") if not p.is_dir()):
        rel = f.relative_to(bank).as_posix()
        inner = f.relative_to(folder)
        if f.is_file() and not f.is_symlink() and f.suffix == ".md" and not any(
                part.startswith(".") for part in inner.parts):
            inv.moves.append((rel, f"{DETAILS}/{KNOWN_DIRS[folder.name]}/{inner.as_posix()}"))
        else:
            inv.left.append((rel, "not a Markdown file"))
    if len(inv.left) == kept:
        subdirs = [p for p in folder.rglob("*") if p.is_dir()]
        inv.emptied += sorted((p.relative_to(bank).as_posix() for p in [*subdirs, folder]), reverse=True)


def _check_moves(bank: Path, moves: list[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for src, dst in moves:
        if (bank / dst).exists():
            raise BankError(f"memory-bank/{src}: cannot move it to memory-bank/{dst}: that file already exists. "
                            "Merge the two by hand and run again (nothing was changed)")
        if dst in seen:
            raise BankError(f"memory-bank/{src} and memory-bank/{seen[dst]} would both move to memory-bank/{dst}. "
                            "Rename one by hand and run again (nothing was changed)")
        seen[dst] = src


def _folders(bank: Path, moves: list[tuple[str, str]]) -> list[Mkdir]:
    needed = {DETAILS, *(f"{DETAILS}/{f}" for f in STANDARD_FOLDERS)}
    for _, dst in moves:
        parts = dst.split("/")[:-1]
        needed.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return [Mkdir(d) for d in sorted(needed) if not (bank / d).is_dir()]


def plan_migrate(det: Detection, today: date) -> Plan:
    bank = det.bank
    entries = {n: read_text(bank / n) for n in LEGACY_ENTRIES if (bank / n).is_file()}
    inv = _inventory(bank)
    _check_moves(bank, inv.moves)
    git = in_work_tree(bank)
    ops: list[Op] = [*_folders(bank, inv.moves)]
    ops += [Move(src, dst, git and is_tracked(bank, src)) for src, dst in inv.moves]
    layout = read_layout(bank)
    for _, dst in inv.moves:
        layout.add(dst.removeprefix(f"{DETAILS}/"))
    for folder in STANDARD_FOLDERS:
        layout.add_folder(folder)
    makers = {"tech.md": lambda: tpl.tech_md(scan_project(det.project)), "patterns.md": tpl.patterns_md,
              "progress.md": tpl.progress_md}
    for name in STANDARD_FILES:
        if name not in layout.top:
            ops.append(Create(f"{DETAILS}/{name}", makers[name](), "new v7.1 details file; none to migrate"))
            layout.top.add(name)
    origin = {dst.removeprefix(f"{DETAILS}/"): bank / src for src, dst in inv.moves}
    ops += index_ops(bank, layout, origin)
    archive = _archive(bank, entries.get("_index.md"), inv.left)
    if archive is not None:
        ops.append(archive)
        layout.has_legacy = True
    patterns = origin.get("patterns.md", bank / DETAILS / "patterns.md")
    text = _memory_md(det, entries, read_text(patterns) if patterns.is_file() else "", layout, today)
    refuse_secrets(MEMORY, "", text, source=", ".join(sorted(entries)) + " and patterns.md")
    ops.append(Create(MEMORY, text, "v7.1 entry file, from " + ", ".join(sorted(entries))))
    ops += [Delete(n, sha256_text(t)) for n, t in entries.items()]
    ops += [Rmdir(d) for d in inv.emptied]
    notes = ["Detail files move; nothing else is deleted than the old entry files " + ", ".join(entries) + "."]
    if any(user_blocks(t) for t in entries.values()):
        notes.append("Their USER blocks are carried verbatim into MEMORY.md.")
    notes += [f"Left in place (listed in {LEGACY}): memory-bank/{x} ({why})" for x, why in inv.left]
    return Plan(det, tuple(ops), tuple(notes))


def _memory_md(det: Detection, entries: dict[str, str], patterns: str, layout: Layout, today: date) -> str:
    brief = section_body(entries.get("brief.md", ""))
    active = section_body(entries.get("active.md", ""))
    snapshot = (f"{tpl.SNAPSHOT[0]}\n\n{brief}\n" if brief
                else tpl.snapshot_section(scan_project(det.project)))
    rows = decision_rows(patterns, f"memory-bank/{DETAILS}/patterns.md") if patterns else []
    sections = [snapshot, tpl.focus_section(today, active or None), tpl.highlights_section(rows),
                routing_section(layout), tpl.drill_down_section(), tpl.write_safety_section(),
                tpl.quick_answers_section()]
    blocks = [b for n in ("brief.md", "active.md", "_index.md") for b in user_blocks(entries.get(n, ""))]
    return tpl.memory_md(sections, tpl.user_area(blocks))


def _archive(bank: Path, index: str | None, left: list[tuple[str, str]]) -> Archive | None:
    sections: list[str] = []
    sources: list[str] = []
    if index is not None and (body := section_body(index)):
        sources.append("_index.md")
        sections.append(f"## Legacy Routing (Topic)\n\n> From the old `_index.md`; superseded by the Routing Rules "
                        f"in MEMORY.md.\n\n{body}\n")
    if left:
        sources.append("unclassified files")
        items = "".join(f"- `memory-bank/{x}`: {why}\n" for x, why in left)
        sections.append(f"## Unclassified (left in place)\n\n{items}")
    path = bank / LEGACY
    old = read_text(path) if path.is_file() else None
    sections = [s for s in sections if old is None or s not in old]
    if not sections:
        return None
    if old is None:
        new = (f"# Legacy\n\n> Archived by memoryd when this Memory Bank moved to template v7.1.\n\n{MACHINE_START}\n"
               + "\n".join(sections) + f"{MACHINE_END}\n\n{USER_START}\n{USER_END}\n")
    else:
        end = old.find(MACHINE_END)
        at = end if end >= 0 else len(old)
        sep = "" if old[:at].endswith("\n\n") or not old[:at] else ("\n" if old[:at].endswith("\n") else "\n\n")
        new = old[:at] + sep + "\n".join(sections) + old[at:]
    refuse_secrets(LEGACY, old or "", new, source="_index.md")
    return Archive(LEGACY, new, sha256_text(old) if old is not None else None, tuple(sources))
