"""Refusing a config file that someone other than its owner could have written.

Why: the config decides where memoryd sends the owner's memories (``[embedding]`` URL,
``[storage]`` DSN, the socket path). A red-team uid with write access to the file, or
to its folder (it can then replace the file), pointed ``[embedding]`` at its own server
and received every memory, and nothing was said. So before the file is read, both must
belong to us or root and be writable by nobody else; a folder writable by others is
accepted only with the sticky bit and owned by root (``/tmp``: nobody can rename our
file in it). Import-light (stdlib only): the CLI's client commands read the socket key
through this on every editor save.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memoryd.indexer.errors import ConfigError


def check_config_file(path: Path, uid: int | None = None) -> None:
    """Raise :class:`ConfigError` naming ``path`` and the fix when another uid could have changed it.

    ``uid`` is the owner to accept besides root (default: our effective uid); tests pass another.
    A file that does not exist is left to the caller.
    """
    uid = os.geteuid() if uid is None else uid
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (uid, 0):
        raise ConfigError(f"refusing the config file {path}: it belongs to uid {st.st_uid}, not to you (uid {uid}) "
                          f"or root, so its owner decides where your memories go; copy it to a file of your own "
                          f"(and chmod 600 it) or pass --config")
    if mode & 0o022:
        raise ConfigError(f"refusing the config file {path} (mode {mode:04o}): other users can write to it and "
                          f"could point memoryd at their own servers; fix it with: chmod 600 {path}")
    folder = path.parent
    try:
        dst = os.stat(folder)
    except OSError as exc:
        raise ConfigError(f"config folder {folder} cannot be read: {exc.strerror or exc}") from None
    dmode = stat.S_IMODE(dst.st_mode)
    sticky_root = dst.st_uid == 0 and bool(dmode & stat.S_ISVTX)
    if dst.st_uid not in (uid, 0):
        raise ConfigError(f"refusing the config file {path}: its folder {folder} belongs to uid {dst.st_uid}, who "
                          f"could replace the file; keep the config in a folder of your own")
    if dmode & 0o022 and not sticky_root:
        raise ConfigError(f"refusing the config file {path}: its folder {folder} (mode {dmode:04o}) is writable by "
                          f"other users, who could replace the file; fix it with: chmod go-w {folder}")
