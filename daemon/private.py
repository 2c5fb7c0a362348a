"""Keeping what memoryd writes private to its owner: the process umask and the data directory's modes.

The index, its WAL, the vector snapshot, the audit log and the model cache hold
the user's memories (or facts derived from them) in clear text; another local
user must not be able to read them. Each file is created with an explicit
0600 mode where it is created (``memoryd.indexer.store.create_private``, the vector and
model writers, the audit log, the lock). On top of that ``memoryd run`` sets
the process umask to 0077, so a file some library creates on our behalf is
private too.

Directories are different: memoryd never changes the mode of a directory it
did not create (the data directory may be one the user made and shares on
purpose). A data directory that other users can read is *reported* at start
(``datadir.permissive``) instead. Files inside it that memoryd itself wrote
(known names only, owned by us, not symlinks) and that an older version left
group/world-readable are tightened to 0600 (``datafile.mode_fixed``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

PRIVATE_UMASK = 0o077
#: Names memoryd writes in its data directory (a name starts with one of these; ``models/`` is all ours).
OWN_FILE_PREFIXES = ("index.sqlite3", "vectors.faiss", "audit.jsonl", "history.jsonl", "memoryd.lock")
MODELS_DIR = "models"


def set_private_umask() -> int:
    """Make every file and directory this process creates private by default; returns the old umask."""
    return os.umask(PRIVATE_UMASK)


def check_data_dir(data_dir: Path) -> list[Path]:
    """Warn if ``data_dir`` is open to other users; tighten memoryd's own loose files in it.

    Returns the files whose mode was changed. Never raises for a missing
    directory or a file that vanishes meanwhile (it is checked again next start).
    """
    try:
        st = os.stat(data_dir)
    except OSError:
        return []
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        log.warning("datadir.permissive", dir=str(data_dir), mode=f"{mode:04o}",
                    action="left as it is (memoryd does not change a directory's mode); its files are 0600",
                    fix=f"chmod 700 {data_dir}")
    fixed = [p for p in _own_files(data_dir) if _tighten(p)]
    return fixed


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
