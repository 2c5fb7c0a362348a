"""This daemon's site in a shared database, and whether a hit's site is this one.

Its own module, re-exported by the package's ``__init__``, so that the backends take it
from here without anything else of the package.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from memoryd.indexer.atomic import atomic_write_bytes

__all__ = ["SITE_FILE", "foreign_site", "site_id"]

SITE_FILE = "site"  # in the data directory: the default site id, kept when the directory moves


def site_id(configured: str, data_dir: Path, hostname: str | None = None, remember: bool = False) -> str:
    """This daemon's site id in a shared database: the configured one, else the one its data directory keeps.

    The default is ``host:data_dir`` as first computed (the host name so that the same path on
    two machines never collides, the data directory so that two daemons on one machine are two
    sites), written to ``DATA_DIR/site`` the first time a writer opens the database
    (``remember``): a data directory moved or renamed later keeps its site, so its rows are not
    left behind as a stale copy. A copied data directory copies the id too; the second process
    to claim it is refused (see :class:`memoryd.indexer.storage.postgres.connect.SiteInUseError`).
    """
    if configured:
        return configured
    kept = _kept_site(data_dir / SITE_FILE)
    if kept:
        return kept
    site = f"{hostname or socket.gethostname()}:{data_dir}"
    if remember:
        with contextlib.suppress(OSError):  # unwritable: the computed id is still right for this run
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write_bytes(data_dir / SITE_FILE, (site + "\n").encode())
    return site


def _kept_site(path: Path) -> str:
    """The site id a data directory keeps; "" when it keeps none (or something unusable: then the default)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if text and text.isprintable() and len(text) <= 1024 else ""


def foreign_site(requested: str | None, own: str | None) -> str | None:
    """Why a ``get``/``forget`` naming a search hit's ``site`` must not act here (None: it may).

    A hit of another site names a file on that site's machine; a file of the same path here is
    another file, so reading or forgetting it would answer about the wrong memory."""
    if requested is None or requested == "self" or requested == own:
        return None
    if own is None:
        return "param 'site' needs storage.backend = 'postgres' (the embedded index has one site)"
    return (f"that hit is from site {requested!r}, not this daemon's ({own!r}): its file is on that site's"
            f" machine; a file of the same path here is another file (ask site {requested!r}'s daemon)")
