"""The sites of a shared database: who holds each, what each holds, and dropping a stale one.

A site is one process's share of the database (``storage.site``): its roots, their files and
chunks. The process that writes a site holds the site's advisory lock (:func:`.connect.site_key`)
and records itself in ``memoryd_sites`` (host, pid, data directory, version; ``last_contact``
is refreshed at every snapshot). :func:`list_sites` joins that with the locks granted right now
(``pg_locks``, readable by every role), so a live site is told from one whose daemon stopped —
whose rows every other daemon still searches until :func:`drop_site` removes them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.postgres import corpus


@dataclass
class RootInfo:
    path: str  # as the site's config names it (on the site's machine)
    files: int


@dataclass
class SiteInfo:
    site: str
    host: str = ""
    pid: int | None = None
    data_dir: str = ""
    version: str = ""
    started: float | None = None
    last_contact: float | None = None
    locked_by: int | None = None  # the server pid of the session holding the site's lock, None: nobody (stale)
    roots: list[RootInfo] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.locked_by is not None

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "live": self.live, "host": self.host, "pid": self.pid, "data_dir": self.data_dir,
                "version": self.version, "started": _iso(self.started), "last_contact": _iso(self.last_contact),
                "files": sum(r.files for r in self.roots),
                "roots": [{"path": r.path, "files": r.files} for r in self.roots]}


@dataclass
class DropResult:
    site: str
    roots: int
    files: int
    chunks: int
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "roots": self.roots, "files": self.files, "chunks": self.chunks,
                "dry_run": self.dry_run}


class SiteBusyError(StoreError):
    """The site is held by a running process: it cannot be dropped (its daemon would index it again)."""


def key(text: str) -> int:
    """An advisory-lock key: 63 bits of the text's SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def site_key(site: str) -> int:
    """The advisory-lock key of a whole site: held by the one process that writes that site's rows."""
    return key(f"memoryd-site\x00{site}")


def record_claim(conn: Any, site: str, about: dict[str, Any]) -> None:
    """The site's row, as the process that just took its lock describes itself."""
    now = time.time()
    conn.execute(
        "INSERT INTO memoryd_sites (site, host, pid, data_dir, version, started, last_contact)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (site) DO UPDATE SET host = EXCLUDED.host,"
        " pid = EXCLUDED.pid, data_dir = EXCLUDED.data_dir, version = EXCLUDED.version,"
        " started = EXCLUDED.started, last_contact = EXCLUDED.last_contact",
        (site, str(about.get("host", "")), about.get("pid"), str(about.get("data_dir", "")),
         str(about.get("version", "")), now, now))


def touch(conn: Any, site: str) -> None:
    """The site was heard from now (every snapshot)."""
    conn.execute("UPDATE memoryd_sites SET last_contact = %s WHERE site = %s", (time.time(), site))


def describe_holder(conn: Any, site: str) -> str:
    """The process holding ``site`` as it recorded itself, in words."""
    row = conn.execute("SELECT host, pid, data_dir, last_contact FROM memoryd_sites WHERE site = %s",
                       (site,)).fetchone()
    if row is None or not (row[0] or row[1]):
        return "no record of which: a memoryd older than this one"
    host, pid, data_dir, last = row
    return f"host {host or '?'}, pid {pid if pid is not None else '?'}, data dir {data_dir or '?'}, last heard" \
           f" from {_iso(last) or 'never'}"


def granted_locks(conn: Any) -> dict[int, int]:
    """Every advisory lock granted now, by its 64-bit key: the server pid holding it."""
    rows = conn.execute("SELECT classid::bigint, objid::bigint, pid FROM pg_locks"
                        " WHERE locktype = 'advisory' AND granted AND objsubid = 1").fetchall()
    return {(int(hi) << 32) | int(lo): int(pid) for hi, lo, pid in rows}


def list_sites(conn: Any) -> list[SiteInfo]:
    """Every site the database knows (recorded, or owning roots), with its roots and who holds what."""
    locks = granted_locks(conn)
    found: dict[str, SiteInfo] = {}
    for row in conn.execute("SELECT site, host, pid, data_dir, version, started, last_contact FROM memoryd_sites"):
        found[row[0]] = SiteInfo(row[0], row[1], row[2], row[3], row[4], row[5], row[6])
    for site, path, files in conn.execute(
            "SELECT r.site, r.path, count(f.id) FROM memoryd_roots r LEFT JOIN memoryd_files f ON f.root_id = r.id"
            " GROUP BY r.site, r.path ORDER BY r.site, r.path"):
        info = found.setdefault(site, SiteInfo(site))
        info.roots.append(RootInfo(path, int(files)))
    for info in found.values():
        info.locked_by = locks.get(site_key(info.site))
    return sorted(found.values(), key=lambda s: s.site)


def drop_site(conn: Any, site: str, dry_run: bool = False) -> DropResult:
    """Remove every row of ``site`` (roots, files, chunks, postings, its record) in one transaction.

    Refused (:class:`SiteBusyError`) while any session holds the site's lock: its daemon would index
    it all again. The lock is taken for the transaction, so no daemon claims the site meanwhile.
    The shared embedding cache stays (other sites' chunks may use the same vectors).
    """
    with conn.transaction():
        row = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (site_key(site),)).fetchone()
        if not (row and row[0]):
            raise SiteBusyError(f"site {site!r} is in use by a running memoryd ({describe_holder(conn, site)}):"
                                " stop it first (a running daemon would index its roots again)")
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM memoryd_roots WHERE site = %s),"
            " (SELECT count(*) FROM memoryd_files f JOIN memoryd_roots r ON r.id = f.root_id WHERE r.site = %s),"
            " (SELECT count(*) FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
            "  JOIN memoryd_roots r ON r.id = f.root_id WHERE r.site = %s)", (site, site, site)).fetchone()
        assert counts is not None
        result = DropResult(site, int(counts[0]), int(counts[1]), int(counts[2]), dry_run)
        if dry_run:
            return result
        ids = [int(r[0]) for r in conn.execute(
            "SELECT f.id FROM memoryd_files f JOIN memoryd_roots r ON r.id = f.root_id WHERE r.site = %s"
            " FOR UPDATE OF f", (site,))]
        gone = corpus.drop_postings(conn, "c.file_id = ANY(%s)", [ids])
        conn.execute("DELETE FROM memoryd_files WHERE id = ANY(%s)", (ids,))  # chunks go with them (cascade)
        conn.execute("DELETE FROM memoryd_roots WHERE site = %s", (site,))
        conn.execute("DELETE FROM memoryd_sites WHERE site = %s", (site,))
        conn.execute("DELETE FROM memoryd_meta WHERE key = ANY(%s)", ([f"cache_hits:{site}", f"cache_misses:{site}"],))
        corpus.apply(conn, gone)
    return result


def memoryd_version() -> str:
    """This memoryd's version, for the site's record (``memoryd sites list``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "unknown"


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
