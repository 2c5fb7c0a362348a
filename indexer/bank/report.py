"""Text and JSON for detections, plans and apply summaries (the seed's execution-summary shape).

Paths are shown as ``memory-bank/…`` (the bank folder's own name) so that a
summary reads the same whichever PATH form was given.
"""

from __future__ import annotations

from typing import Any

from memoryd.indexer.bank.model import (
    Archive,
    ContentChange,
    Create,
    Delete,
    Detection,
    Mkdir,
    Move,
    Op,
    Plan,
    Rmdir,
    Update,
)

_CHANGE_TEXT = {
    "set_marker": "version marker {}",
    "insert_marker": "insert version marker {}",
    "append_section": "append section {}",
    "refresh_section": "refresh the generated part of {}",
    "add_entry": "add entry for {}",
    "remove_entry": "remove entry for {} (file is gone)",
}


def _p(plan: Plan, rel: str, folder: bool = False) -> str:
    return f"{plan.detection.bank.name}/{rel}" + ("/" if folder and rel else "")


def change_text(c: ContentChange) -> str:
    return _CHANGE_TEXT.get(c.kind, c.kind + " {}").format(c.detail)


def render_detection(det: Detection) -> str:
    version = f" (template v{det.version[0]}.{det.version[1]})" if det.version else ""
    lines = [f"{det.bank}: {det.case}{version}", *(f"  - {r}" for r in det.reasons)]
    lines += [f"  ! {p}" for p in det.problems]
    return "\n".join(lines)


def op_lines(plan: Plan, op: Op) -> list[str]:
    """One line per thing an operation does, in plan wording."""
    if isinstance(op, Mkdir):
        return [f"create folder {_p(plan, op.path, folder=True)}"]
    if isinstance(op, Create):
        return [f"create {_p(plan, op.path)} ({op.reason})"]
    if isinstance(op, Update):
        return [f"update {_p(plan, op.path)}: {change_text(c)}" for c in op.changes]
    if isinstance(op, Move):
        return [f"move {_p(plan, op.src)} → {_p(plan, op.dst)}{' (git mv)' if op.git else ''}"]
    if isinstance(op, Archive):
        return [f"archive to {_p(plan, op.path)}: {', '.join(op.sources)}"]
    if isinstance(op, Rmdir):
        return [f"remove empty folder {_p(plan, op.path, folder=True)} (all its files moved)"]
    return [f"delete {_p(plan, op.path)} (old entry file, migrated)"]


def plan_steps(plan: Plan) -> list[str]:
    """Every step of the plan as one line, in the order ``apply`` carries them out."""
    return [line for op in plan.ops for line in op_lines(plan, op)]


def render_plan(plan: Plan) -> str:
    lines = [render_detection(plan.detection), ""]
    if plan.ops:
        steps = plan_steps(plan)
        lines += [f"Plan ({len(steps)} steps):", *(f"- {s}" for s in steps)]
    else:
        lines.append("Plan: nothing to do; the Memory Bank is up to date.")
    if plan.notes:
        lines += ["", "Notes:", *(f"- {n}" for n in plan.notes)]
    if plan.ops:
        lines += ["", "Nothing was changed. Run `memoryd bank apply PATH` to carry out this plan."]
    return "\n".join(lines)


def summary_json(plan: Plan, done: tuple[Op, ...], error: str | None = None) -> dict[str, Any]:
    """The apply summary: what was created / updated / moved / archived / deleted, and the status."""
    out: dict[str, Any] = {"case": plan.detection.case, "bank": str(plan.detection.bank), "created": [],
                           "updated": [], "moved": [], "archived": [], "deleted": [], "removed_folders": []}
    for op in done:
        if isinstance(op, Mkdir | Create):
            out["created"].append(_p(plan, op.path, folder=isinstance(op, Mkdir)))
        elif isinstance(op, Update):
            out["updated"].append({"path": _p(plan, op.path), "changes": [change_text(c) for c in op.changes]})
        elif isinstance(op, Move):
            out["moved"].append({"from": _p(plan, op.src), "to": _p(plan, op.dst), "git": op.git})
        elif isinstance(op, Archive):
            out["archived"].append({"path": _p(plan, op.path), "sources": list(op.sources)})
        elif isinstance(op, Delete):
            out["deleted"].append(_p(plan, op.path))
        elif isinstance(op, Rmdir):
            out["removed_folders"].append(_p(plan, op.path, folder=True))
    out["status"] = "failed" if error else "success"
    out["error"] = error
    out["remaining"] = len(plan.ops) - len(done)
    return out


def render_summary(plan: Plan, done: tuple[Op, ...], error: str | None = None) -> str:
    s = summary_json(plan, done, error)
    lines = [f"[Memory Bank {plan.detection.case} applied]" if not error else
             f"[Memory Bank {plan.detection.case} stopped]", "", "Done:"]
    lines += [f"- created: {p}" for p in s["created"]]
    lines += [f"- updated: {u['path']} ({'; '.join(u['changes'])})" for u in s["updated"]]
    lines += [f"- moved: {m['from']} → {m['to']}{' (git mv)' if m['git'] else ''}" for m in s["moved"]]
    lines += [f"- archived: {a['path']} (from {', '.join(a['sources'])})" for a in s["archived"]]
    lines += [f"- deleted: {p}" for p in s["deleted"]]
    lines += [f"- removed empty folder: {p}" for p in s["removed_folders"]]
    if not done:
        lines.append("- nothing" + ("" if error else ": the Memory Bank is up to date"))
    lines += ["", f"Status: failed: {error} ({s['remaining']} operations not done; run `memoryd bank plan` "
                  "to see what is left)" if error else "Status: success"]
    return "\n".join(lines)
