"""Planning the init, upgrade and refresh flows (docs/memory-bank.md) (migration lives in :mod:`migrate`).

* init: create what is missing (folders, details files, a v7.1 MEMORY.md); never overwrite.
* upgrade (append-only): refuse unless all four block markers are sound; set or insert the
  version marker; append the v7.1 sections the file lacks (exact heading match) just before
  the MACHINE block's end. The seed names the four sections new in v7.1; memoryd also appends
  any of the three v7.0 ones a file lacks, so that every upgraded file has the full set.
* refresh: rewrite only the memoryd-generated parts of Project Snapshot and Routing Rules
  (a part edited by hand is kept and reported), and apply the index rule.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from memoryd.indexer.bank import templates as tpl
from memoryd.indexer.bank.detect import MEMORY, block_problems, read_text
from memoryd.indexer.bank.guards import refuse_secrets
from memoryd.indexer.bank.indexes import index_ops, sha256_text
from memoryd.indexer.bank.layout import DETAILS, STANDARD_FILES, STANDARD_FOLDERS, read_layout
from memoryd.indexer.bank.model import BankError, ContentChange, Create, Detection, Mkdir, Op, Plan, Update
from memoryd.indexer.bank.routing import routing_body, routing_section
from memoryd.indexer.bank.scan import scan_project
from memoryd.indexer.bank.sections import find_section, generated_region, lines_outside_fences, replace_generated
from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, TEMPLATE_MARKER, user_spans


def plan_init(det: Detection, today: date) -> Plan:
    bank = det.bank
    snap = scan_project(det.project)
    ops: list[Op] = [] if bank.is_dir() else [Mkdir("")]
    layout = read_layout(bank)
    folders = (DETAILS, *(f"{DETAILS}/{f}" for f in STANDARD_FOLDERS))
    ops += [Mkdir(rel) for rel in folders if not (bank / rel).is_dir()]
    layout.folders.update({f: layout.folders.get(f, set()) for f in STANDARD_FOLDERS})
    makers = {"tech.md": lambda: tpl.tech_md(snap), "patterns.md": tpl.patterns_md, "progress.md": tpl.progress_md}
    for name in STANDARD_FILES:
        if not (bank / DETAILS / name).exists():
            ops.append(Create(f"{DETAILS}/{name}", makers[name](), "v7.1 details file"))
            layout.top.add(name)
    ops += index_ops(bank, layout)
    sections = [tpl.snapshot_section(snap), tpl.focus_section(today), tpl.highlights_section([]),
                routing_section(layout), tpl.drill_down_section(), tpl.write_safety_section(),
                tpl.quick_answers_section()]
    text = tpl.memory_md(sections, tpl.user_area())
    for op in ops:
        if isinstance(op, Create):
            refuse_secrets(op.path, "", op.content, source="the project scan")
    refuse_secrets(MEMORY, "", text, source="the project scan")
    ops.append(Create(MEMORY, text, "v7.1 entry file"))
    return Plan(det, tuple(ops))


def _refuse_broken(text: str, what: str, require_user: bool = True) -> None:
    problems = block_problems(text, require_user=require_user)
    if problems:
        raise BankError(f"memory-bank/{MEMORY}: cannot {what}: {'; '.join(problems)}. Fix the block markers by "
                        "hand and run again (nothing was changed)")


def plan_upgrade(det: Detection, today: date) -> Plan:
    old = read_text(det.bank / MEMORY)
    _refuse_broken(old, "upgrade")
    text, marker_change = _set_marker(old)
    layout = read_layout(det.bank)
    ops = index_ops(det.bank, layout)
    legacy_routing = find_section(text, [tpl.LEGACY_ROUTING]) is not None
    builders = {tpl.SNAPSHOT: lambda: tpl.snapshot_section(scan_project(det.project)),
                tpl.ROUTING: lambda: routing_section(layout, legacy_note=legacy_routing)}
    added: list[str] = []
    changes = [marker_change]
    for names in tpl.ALL_SECTIONS:
        if find_section(text, names) is None:
            added.append(builders.get(names, lambda names=names: _fixed_section(names, today))())
            changes.append(ContentChange("append_section", names[0]))
    if added:
        text = _insert_before_machine_end(text, added)
    refuse_secrets(MEMORY, old, text, source="the project scan")
    ops.append(Update(MEMORY, text, sha256_text(old), tuple(changes)))
    return Plan(det, tuple(ops), ("USER blocks stay byte for byte as they are.",))


def _fixed_section(names: tuple[str, ...], today: date) -> str:
    fixed = {tpl.FOCUS: lambda: tpl.focus_section(today), tpl.HIGHLIGHTS: lambda: tpl.highlights_section([]),
             tpl.DRILL_DOWN: tpl.drill_down_section, tpl.WRITE_SAFETY: tpl.write_safety_section,
             tpl.QUICK_ANSWERS: tpl.quick_answers_section}
    return fixed[names]()


def _set_marker(text: str) -> tuple[str, ContentChange]:
    spans = user_spans(text)
    for off, line in lines_outside_fences(text):
        m = TEMPLATE_MARKER.search(line)
        if m and not any(a <= off < b for a, b in spans):
            a, b = off + m.start(), off + m.end()
            return text[:a] + tpl.MARKER + text[b:], ContentChange("set_marker", f"v{m.group(1)}.{m.group(2)} → v7.1")
    i = text.find(MACHINE_START) + len(MACHINE_START)
    if text.startswith("\n", i):
        return text[: i + 1] + tpl.MARKER + "\n" + text[i + 1:], ContentChange("insert_marker", "v7.1")
    return text[:i] + "\n" + tpl.MARKER + "\n" + text[i:], ContentChange("insert_marker", "v7.1")


def _insert_before_machine_end(text: str, sections: list[str]) -> str:
    end = text.find(MACHINE_END)
    head = text[:end]
    if head and not head.endswith("\n"):
        head += "\n"
    if head and not head.endswith("\n\n"):
        head += "\n"
    return head + "\n".join(sections) + "\n" + text[end:]


def plan_refresh(det: Detection, today: date) -> Plan:
    old = read_text(det.bank / MEMORY)
    _refuse_broken(old, "refresh", require_user=False)
    layout = read_layout(det.bank)
    ops = index_ops(det.bank, layout)
    notes: list[str] = []
    text, changes = old, []
    snap = scan_project(det.project)
    parts: tuple[tuple[tuple[str, ...], Callable[[], str], Callable[[], str]], ...] = (
        (tpl.SNAPSHOT, lambda: tpl.snapshot_body(snap), lambda: tpl.snapshot_section(snap)),
        (tpl.ROUTING, lambda: routing_body(layout),
         lambda: routing_section(layout, legacy_note=find_section(text, [tpl.LEGACY_ROUTING]) is not None)))
    for names, body, whole in parts:
        span = find_section(text, names)
        if span is None:
            text = _insert_before_machine_end(text, [whole()])
            changes.append(ContentChange("append_section", names[0]))
            continue
        region = generated_region(text, *span)
        if region is None:
            notes.append(f"{names[0]} has no memoryd-generated part (written by hand): kept as it is.")
        elif not region[2]:
            notes.append(f"{names[0]}: its generated part was edited by hand since memoryd wrote it: kept.")
        elif text[region[0]:region[1]] != (new := body()):
            text = replace_generated(text, region[0], region[1], new)
            changes.append(ContentChange("refresh_section", names[0]))
    if changes:
        refuse_secrets(MEMORY, old, text, source="the project scan")
        ops.append(Update(MEMORY, text, sha256_text(old), tuple(changes)))
    return Plan(det, tuple(ops), tuple(notes))

