"""Keeping what memoryd writes private to its owner: the process umask and the data directory's modes.

The index, its WAL, the vector snapshot, the audit log and the model cache hold
the user's memories (or facts derived from them) in clear text; another local
user must not be able to read them. Each file is created with an explicit
0600 mode where it is created (``memoryd.indexer.storage.embedded.store.create_private``, the vector and
model writers, the audit log, the lock). On top of that ``memoryd run`` sets
the process umask to 0077, so a file some library creates on our behalf is
private too.

Directories are different: memoryd never changes the mode of a directory it
did not create (the data directory may be one the user made and shares on
purpose). A data directory that other users can read is *reported* at start
(``datadir.permissive``) instead; one that other users can *write* (or that
another uid owns), and likewise its ``journal/``, is refused (``datadir.unsafe``):
its journal files are edits the next start carries out. Files inside it that memoryd itself wrote
(known names only, owned by us, not symlinks) and that an older version left
group/world-readable are tightened to 0600 (``datafile.mode_fixed``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import structlog

from memoryd.indexer.errors import DaemonError
from memoryd.indexer.write.journal import JOURNAL_DIR

log = structlog.get_logger(__name__)

PRIVATE_UMASK = 0o077
#: Names memoryd writes in its data directory (a name starts with one of these; ``models/`` is all ours).
OWN_FILE_PREFIXES = ("index.sqlite3", "vectors.faiss", "audit.jsonl", "history.jsonl", "memoryd.lock")
MODELS_DIR = "models"


def set_private_umask() -> int:
    """Make every file and directory this process creates private by default; returns the old umask."""
    return os.umask(PRIVATE_UMASK)


class UnsafeDataDir(DaemonError):
    """The data directory (or its ``journal/``) can be written by another user: refused at start."""


def check_data_dir(data_dir: Path) -> list[Path]:
    """Refuse a ``data_dir`` others can write; warn if others can read it; tighten memoryd's own loose files.

    A folder another user can write (a group/other write bit, or owned by another uid) lets that user
    plant a journal file — which the next start would carry out — or swap the history: raises
    :class:`UnsafeDataDir` naming the folder and the fix. Returns the files whose mode was changed.
    Never raises for a missing directory or a file that vanishes meanwhile (checked again next start).
    """
    try:
        st = os.stat(data_dir)
    except OSError:
        return []
    _refuse_writable(data_dir, st)
    with contextlib.suppress(FileNotFoundError):
        journal = data_dir / JOURNAL_DIR
        _refuse_writable(journal, os.lstat(journal))
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        log.warning("datadir.permissive", dir=str(data_dir), mode=f"{mode:04o}",
                    action="left as it is (memoryd does not change a directory's mode); its files are 0600",
                    fix=f"chmod 700 {data_dir}")
    fixed = [p for p in _own_files(data_dir) if _tighten(p)]
    return fixed


def _refuse_writable(folder: Path, st: os.stat_result) -> None:
    """Raise :class:`UnsafeDataDir` when another user can write ``folder`` (or it is a link)."""
    mode = stat.S_IMODE(st.st_mode)
    why = ""
    if stat.S_ISLNK(st.st_mode):
        why = "is a symlink"
    elif st.st_uid != os.geteuid():
        why = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif mode & 0o022:
        why = f"can be written by other users (mode {mode:04o})"
    if why:
        log.error("datadir.unsafe", dir=str(folder), why=why, fix=f"chmod 700 {folder}")
        raise UnsafeDataDir(f"{folder} {why}: another user could plant edits memoryd would carry out at start; "
                            f"make it yours alone (chown it to this user, then `chmod 700 {folder}`)")


def _own_files(data_dir: Path) -> list[Path]:
    files = [p for p in _entries(data_dir) if p.name.startswith(OWN_FILE_PREFIXES)]
    models = data_dir / MODELS_DIR
    if models.is_dir() and not models.is_symlink():
        files += _entries(models)
    return files


def _entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _tighten(path: Path) -> bool:
    """chmod 0600 a regular file of ours that others may read; True if it was changed.

    Opened with ``O_NOFOLLOW`` and changed with ``fchmod`` on what was opened, so a
    symlink swapped in meanwhile is never followed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or not mode & 0o077:
            return False
        os.fchmod(fd, mode & 0o700)
    except OSError:
        return False
    finally:
        os.close(fd)
    log.warning("datafile.mode_fixed", path=str(path), old_mode=f"{mode:04o}", mode=f"{mode & 0o700:04o}")
    return True
