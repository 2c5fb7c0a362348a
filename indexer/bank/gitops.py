"""The three git questions a migration asks: in a work tree? tracked? move it with history.

``git mv`` (rather than a rename) keeps ``git log --follow`` working for moved
detail files, as the migration flow asks (docs/memory-bank.md). Only tracked files are moved with git: git
refuses to ``mv`` an untracked file, and a plain rename is right for those.
A missing ``git`` binary just means "not in a work tree".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from memoryd.indexer.bank.model import BankError

_TIMEOUT_S = 30.0


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def in_work_tree(path: Path) -> bool:
    """True if ``path`` (an existing folder) lies inside a git work tree."""
    r = _git(path, "rev-parse", "--is-inside-work-tree")
    return r is not None and r.returncode == 0 and r.stdout.strip() == "true"


def is_tracked(bank: Path, rel: str) -> bool:
    """True if ``bank/rel`` is in git's index."""
    r = _git(bank, "ls-files", "--error-unmatch", "--", rel)
    return r is not None and r.returncode == 0


def git_mv(bank: Path, src: str, dst: str) -> None:
    """``git mv src dst`` inside ``bank``; raises :class:`BankError` with git's message on failure."""
    r = _git(bank, "mv", "--", src, dst)
    if r is None or r.returncode != 0:
        detail = (r.stderr or r.stdout).strip() if r is not None else "git could not be run"
        raise BankError(f"memory-bank/{src}: git mv to {dst} failed: {detail}")
