"""Memory Bank maintenance (docs/memory-bank.md): detect, plan and apply init / upgrade / migrate / refresh.

A pure library: :func:`detect` classifies a folder, :func:`make_plan` lists
typed operations without changing anything, :func:`apply_plan` carries them
out with the bank's guards (only ``.md``, only inside ``memory-bank/``, USER
blocks byte-identical, no deletes but migration's, no secrets, atomic writes).
Applying a fresh plan right after an apply finds nothing to do.
"""

from __future__ import annotations

from memoryd.indexer.bank.apply import apply_plan
from memoryd.indexer.bank.detect import detect, locate
from memoryd.indexer.bank.model import (
    Archive,
    BankApplyError,
    BankError,
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
from memoryd.indexer.bank.plan import make_plan
from memoryd.indexer.bank.report import plan_steps, render_detection, render_plan, render_summary, summary_json

__all__ = [
    "Archive", "BankApplyError", "BankError", "ContentChange", "Create", "Delete", "Detection", "Mkdir", "Move", "Op",
    "Plan", "Rmdir", "Update", "apply_plan", "detect", "locate", "make_plan", "plan_steps", "render_detection",
    "render_plan", "render_summary", "summary_json",
]
