"""The typed vocabulary of Memory Bank maintenance: detections, operations, plans.

A plan is a list of operations computed from the folder as it is, without
changing anything. Each operation carries everything ``apply`` needs (full
new file contents, the sha256 the file had when the plan was made), so that
applying is mechanical and refuses to act on a file that changed meanwhile.
Paths in operations are POSIX strings relative to the ``memory-bank/`` folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memoryd.indexer.errors import MemorydError

Case = Literal["init", "upgrade", "migrate", "refresh"]
CURRENT_VERSION = (7, 1)
BANK_DIR = "memory-bank"


class BankError(MemorydError):
    """A Memory Bank cannot be planned or changed as asked; the message names the file and the reason."""


class BankApplyError(BankError):
    """Applying a plan stopped part-way; ``done`` lists the operations already carried out."""

    def __init__(self, message: str, done: tuple[Op, ...]) -> None:
        super().__init__(message)
        self.done = done


@dataclass(frozen=True)
class Detection:
    """Which maintenance flow (docs/memory-bank.md) a folder needs, and why (``reasons`` are whole sentences)."""

    case: Case
    bank: Path
    project: Path
    version: tuple[int, int] | None
    reasons: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "bank": str(self.bank),
            "project": str(self.project),
            "version": f"v{self.version[0]}.{self.version[1]}" if self.version else None,
            "reasons": list(self.reasons),
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class ContentChange:
    """One edit inside an updated file: ``kind`` is a stable code, ``detail`` is shown to people."""

    kind: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"change": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class Mkdir:
    path: str
    op: Literal["mkdir"] = "mkdir"


@dataclass(frozen=True)
class Create:
    """A new file; applying fails if the path exists by then."""

    path: str
    content: str
    reason: str
    op: Literal["create"] = "create"


@dataclass(frozen=True)
class Update:
    """A whole-file replacement of a file whose sha256 was ``expected_sha256`` at plan time."""

    path: str
    content: str
    expected_sha256: str
    changes: tuple[ContentChange, ...]
    op: Literal["update"] = "update"


@dataclass(frozen=True)
class Move:
    """Rename inside the bank; ``git`` says whether ``git mv`` keeps the file's history."""

    src: str
    dst: str
    git: bool
    op: Literal["move"] = "move"


@dataclass(frozen=True)
class Archive:
    """Write ``legacy.md``: created (``expected_sha256`` None) or replaced with sections appended."""

    path: str
    content: str
    expected_sha256: str | None
    sources: tuple[str, ...]
    op: Literal["archive"] = "archive"


@dataclass(frozen=True)
class Delete:
    """Remove an old entry file (migration only) that still has the bytes the plan read."""

    path: str
    expected_sha256: str
    op: Literal["delete"] = "delete"


@dataclass(frozen=True)
class Rmdir:
    """Remove a folder a migration emptied by its moves; applying fails if it is not empty by then."""

    path: str
    op: Literal["rmdir"] = "rmdir"


Op = Mkdir | Create | Update | Move | Archive | Delete | Rmdir


def op_to_json(op: Op) -> dict[str, Any]:
    """The operation as shown by ``--json`` (file contents left out: they can be large)."""
    if isinstance(op, Move):
        return {"op": op.op, "path": op.src, "to": op.dst, "git": op.git}
    out: dict[str, Any] = {"op": op.op, "path": op.path}
    if isinstance(op, Create):
        out["reason"] = op.reason
    elif isinstance(op, Update):
        out["changes"] = [c.to_json() for c in op.changes]
    elif isinstance(op, Archive):
        out["sources"] = list(op.sources)
    return out


@dataclass(frozen=True)
class Plan:
    """What ``apply`` will do, in order. ``notes`` explain what is deliberately left alone."""

    detection: Detection
    ops: tuple[Op, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            **self.detection.to_json(),
            "operations": [op_to_json(op) for op in self.ops],
            "notes": list(self.notes),
        }
