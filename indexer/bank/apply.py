"""Carrying out a :class:`Plan`, with the guards of :mod:`memoryd.indexer.bank.guards` checked again per operation.

Every file write is atomic and conditional (:mod:`memoryd.indexer.atomic`): a file
that changed since the plan read it is not overwritten, and the apply stops
with :class:`BankApplyError` listing what was already done. Before any
update, the USER blocks of the old and new text are compared byte for byte.
Deletes are accepted only for the three old entry files of a migration.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from memoryd.indexer.atomic import ConcurrentEditError, atomic_write_bytes, current_sha256, fsync_dir
from memoryd.indexer.bank.detect import LEGACY_ENTRIES, read_text
from memoryd.indexer.bank.gitops import git_mv
from memoryd.indexer.bank.guards import checked_path, refuse_secrets
from memoryd.indexer.bank.model import (
    Archive,
    BankApplyError,
    BankError,
    Create,
    Delete,
    Mkdir,
    Move,
    Op,
    Plan,
    Rmdir,
    Update,
)
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.markdown.memblocks import assert_user_blocks_unchanged

log = structlog.get_logger(__name__)
NEW_FILE_MODE = 0o644  # bank files are project documents, usually committed and shared


def apply_plan(plan: Plan) -> tuple[Op, ...]:
    """Run ``plan.ops`` in order; returns them all. Raises :class:`BankApplyError` (with ``done``) on the
    first operation that fails or is refused; operations after it are not attempted."""
    bank = plan.detection.bank
    done: list[Op] = []
    for op in plan.ops:
        try:
            _apply_one(bank, op, plan.detection.case)
        except (MemorydError, OSError) as exc:
            log.warning("bank.apply_failed", bank=str(bank), op=op.op, error=str(exc))
            raise BankApplyError(str(exc), tuple(done)) from exc
        done.append(op)
    log.info("bank.applied", bank=str(bank), case=plan.detection.case, operations=len(done))
    return tuple(done)


def _apply_one(bank: Path, op: Op, case: str) -> None:
    if isinstance(op, Mkdir):
        checked_path(bank, op.path, markdown=False).mkdir(exist_ok=True)
    elif isinstance(op, Create):
        _write(bank, op.path, op.content, None)
    elif isinstance(op, Update | Archive):
        _write(bank, op.path, op.content, op.expected_sha256)
    elif isinstance(op, Move):
        _move(bank, op)
    elif isinstance(op, Delete):
        _delete(bank, op, case)
    elif isinstance(op, Rmdir):
        path = checked_path(bank, op.path, markdown=False)
        if case != "migrate" or path == bank:
            raise BankError(f"memory-bank/{op.path}: refusing to remove a folder outside a migration")
        path.rmdir()  # OSError if not empty: a file appeared since the plan, so the folder stays


def _write(bank: Path, rel: str, content: str, expected: str | None) -> None:
    path = checked_path(bank, rel)
    current = current_sha256(path)
    if current != expected:
        what = "appeared" if expected is None else ("disappeared" if current is None else "changed")
        raise ConcurrentEditError(f"memory-bank/{rel} {what} since the plan was made; run the plan again")
    old = ""
    if expected is not None:  # a new file's USER blocks are a template or carried verbatim by the plan
        old = read_text(path)
        assert_user_blocks_unchanged(old, content, f"memory-bank/{rel}")
    refuse_secrets(rel, old, content)
    atomic_write_bytes(path, content.encode("utf-8"), expected, check=True, new_mode=NEW_FILE_MODE)


def _move(bank: Path, op: Move) -> None:
    src, dst = checked_path(bank, op.src), checked_path(bank, op.dst)
    if src.is_symlink() or not src.is_file():
        raise BankError(f"memory-bank/{op.src}: not a regular file any more; run the plan again")
    if dst.exists() or dst.is_symlink():
        raise BankError(f"memory-bank/{op.dst}: already exists; refusing to overwrite it")
    if op.git:
        git_mv(bank, op.src, op.dst)
    else:
        os.rename(src, dst)
    fsync_dir(src.parent)
    fsync_dir(dst.parent)


def _delete(bank: Path, op: Delete, case: str) -> None:
    if case != "migrate" or op.path not in LEGACY_ENTRIES:
        raise BankError(f"memory-bank/{op.path}: refusing to delete: only a migration deletes, and only "
                        f"{', '.join(LEGACY_ENTRIES)}")
    path = checked_path(bank, op.path)
    if current_sha256(path) != op.expected_sha256:
        raise ConcurrentEditError(f"memory-bank/{op.path} changed since its content was migrated; not deleted")
    path.unlink()
    fsync_dir(path.parent)
