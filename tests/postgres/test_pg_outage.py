"""The PostgreSQL backend while its database is away: searches fail fast with their own code
(-32031), ``status`` says so, ``remember`` still writes its file, and when the database returns
the daemon re-takes its (site, root) locks and indexes what changed meanwhile, nothing more.

The daemon tests (``slow``) use a real server that the test stops and starts again
(``restartable_pg`` in tests/pgfixture.py); the others check each piece on its own.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import socket
import time
from collections.abc import Iterator
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.render import render_status
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.exits import EXIT_STORAGE_UNAVAILABLE
from memoryd.daemon.rpc.errors import STORAGE_UNAVAILABLE
from memoryd.daemon.rpc.jsonrpc import Peer, Request, dispatch
from memoryd.indexer.config import Config, load
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.errors import ConfigError
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import SiteLockedError, StorageUnavailableError
from memoryd.indexer.storage.postgres import connect
from tests.helpers import CountingEmbedder, ready, running_daemon, wait_for
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import FILTER, SECRET, write_corpus
from tests.postgres.test_pg_daemons import on_postgres

PEER = Peer(pid=1, uid=1, gid=1)
FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n",
         "notes/tools.md": "# Tools\n\nThe editor of choice is Neovim with a dark theme.\n"}


def with_timeout(cfg: Config, seconds: float) -> Config:
    return dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, connect_timeout_s=seconds))


# -- the pieces ----------------------------------------------------------------------------------


def test_connect_timeout_is_validated_and_shipped(tmp_path: Path) -> None:
    toml = tmp_path / "memoryd.toml"
    toml.write_text("[storage]\nconnect_timeout_s = 0.2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"storage\.connect_timeout_s.*0\.2"):
        load(toml, env={})
    toml.write_text("[storage]\nconnect_timeout_s = 7\n", encoding="utf-8")
    assert load(toml, env={}).storage.connect_timeout_s == 7
    assert connect.timeouts(2.5) == {"connect_timeout": 3, "tcp_user_timeout": 2500}
    assert connect.timeouts(1)["connect_timeout"] == 2  # libpq's own minimum


def test_the_error_has_its_own_code_and_data_without_the_password() -> None:
    uri = f"postgresql://memoryd:{SECRET}@127.0.0.1:1/x"  # port 1: the connection is refused at once

    def search(params: dict[str, Any], peer: Peer) -> Any:
        return connect.prepare(uri, "disable", 2)

    line = dispatch(Request(method="search", params={}, id=7, is_notification=False), {"search": search}, PEER)
    assert line is not None and SECRET.encode() not in line
    error = json.loads(line)["error"]
    assert error["code"] == STORAGE_UNAVAILABLE == -32031
    assert error["data"] == {"backend": "postgres", "where": "postgresql://memoryd@127.0.0.1:1/x"}
    assert "cannot connect to postgresql://memoryd@127.0.0.1:1/x" in error["message"]


def test_the_cli_prints_one_line_and_exits_5() -> None:
    from memoryd.daemon.client import cli

    def search(args: Any) -> int:
        raise RpcClientError(STORAGE_UNAVAILABLE, "database postgresql://u@db:5432/m is unreachable",
                             {"backend": "postgres", "where": "postgresql://u@db:5432/m"})

    err = io.StringIO()
    with redirect_stderr(err):
        assert cli._run(search, None) == EXIT_STORAGE_UNAVAILABLE == 5  # type: ignore[arg-type]
    assert err.getvalue() == "memoryd: database postgresql://u@db:5432/m is unreachable\n"


def test_mcp_names_the_outage_in_its_tool_error() -> None:
    from memoryd.daemon.client.mcp_server import DaemonBridge

    bridge = DaemonBridge("/nonexistent/s.sock")
    text = bridge._daemon_refusal("search", RpcClientError(STORAGE_UNAVAILABLE, "database pg://x is unreachable"))
    assert text.startswith("storage unavailable (memoryd error -32031): database pg://x is unreachable")


def test_status_says_in_words_that_the_database_is_unreachable() -> None:
    storage = {"backend": "postgres", "where": "postgresql://u@db:5432/m", "site": "laptop", "reachable": False,
               "since": "2026-01-02T03:04:05Z", "last_error": "database postgresql://u@db:5432/m is unreachable",
               "locks": {"held": [], "lost": [{"root": "/m", "why": "another daemon took the lock"}]}}
    text = render_status({"storage": storage, "model": {}, "index": {}, "cache": {"entries": 0, "hits": 0,
                                                                                  "misses": 0}})
    assert "postgres postgresql://u@db:5432/m, site laptop" in text
    assert "UNREACHABLE since 2026-01-02T03:04:05Z: database postgresql://u@db:5432/m is unreachable" in text
    assert re.search(r"^root lock LOST +/m: another daemon took the lock$", text, re.MULTILINE)
    up = render_status({"storage": {**storage, "reachable": True, "locks": {}}, "model": {}, "index": {},
                        "cache": {"entries": 0, "hits": 0, "misses": 0}})
    assert "reachable since 2026-01-02T03:04:05Z" in up and "LOST" not in up


def test_while_down_one_probe_answers_for_the_calls_right_behind_it() -> None:
    """Calls queued behind a probe of a silent host fail at once instead of each waiting the timeout."""
    from memoryd.indexer.storage.postgres.store import PgStore

    probes: list[int] = []

    def probe() -> Any:
        probes.append(1)
        raise StorageUnavailableError("cannot connect to db", where="postgresql://db/m")

    store = PgStore(None, "s", "postgresql://db/m", timeout_s=60, reopen=lambda: None, probe=probe)  # type: ignore[arg-type]
    store.health.record(False, "first failure")
    for _ in range(3):
        with pytest.raises(StorageUnavailableError, match="postgresql://db/m is unreachable"), store.connection():
            pass
    assert len(probes) == 1 and store.health.error == "cannot connect to db"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never answers: a database host gone silent."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


@pytest.mark.slow  # it waits for the timeout on purpose
def test_a_silent_host_costs_the_connect_timeout_not_the_os_tcp_timeout(silent_port: int, tmp_path: Path) -> None:
    dsn = f"host=127.0.0.1 port={silent_port} user=memoryd password={SECRET} dbname=m"
    cfg = with_timeout(storage_config("postgres", tmp_path, tmp_path / "data", dsn), 2)
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError) as err:
        open_index(cfg, HashEmbedder(64))
    assert time.monotonic() - t0 < 10  # libpq's connect_timeout (2 s), not minutes
    assert err.value.where == f"postgresql://memoryd@127.0.0.1:{silent_port}/m" and SECRET not in str(err.value)


# -- the (site, root) lock after a database restart ---------------------------------------------------


def test_a_restart_drops_the_locks_and_the_next_write_takes_them_again(restartable_pg: Any, tmp_path: Path) -> None:
    root, cfg, idx = _indexed_site(restartable_pg, tmp_path)
    try:
        restartable_pg.stop()
        restartable_pg.start()
        (root / "after.md").write_text("# After\n\nWritten after the restart.\n", encoding="utf-8")
        wait_for(lambda: _indexed(idx, root, "after.md"), timeout=30, what="the write after the restart")
        with pytest.raises(SiteLockedError):  # held again: a second daemon for this root is refused
            open_index(cfg, HashEmbedder(64))
        assert idx.status().storage.to_json()["locks"] == {"held": [str(root)], "lost": []}
    finally:
        idx.close()


def test_the_first_calls_after_a_restart_succeed(restartable_pg: Any, tmp_path: Path) -> None:
    """The pool's idle connections died with the old server: none of them is lent out again."""
    root, _cfg, idx = _indexed_site(restartable_pg, tmp_path)
    try:
        before = [h.chunk_id for h in idx.query(Query("pgvector", k=3, mode="keyword")).hits]
        restartable_pg.stop()
        restartable_pg.start()
        assert [h.chunk_id for h in idx.query(Query("pgvector", k=3, mode="keyword")).hits] == before != []
        assert idx.store.file(idx.store.root_id(root), "MEMORY.md") is not None  # type: ignore[attr-defined]
        assert idx.status().storage.to_json()["reachable"] is True
    finally:
        idx.close()


def test_a_root_another_daemon_took_meanwhile_is_no_longer_indexed(restartable_pg: Any, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    root, cfg, first = _indexed_site(restartable_pg, tmp_path)
    try:
        restartable_pg.stop()
        restartable_pg.start()
        second = wait_for(lambda: _open_or_none(cfg), timeout=30, what="a second daemon to take the free lock")
        try:
            (root / "late.md").write_text("# Late\n\nOnly one daemon may index this.\n", encoding="utf-8")
            wait_for(lambda: _try_index(first, root, "late.md") is not None, timeout=30, what="the first daemon")
            assert _file_or_none(first, root, "late.md") == "absent"  # it did not index the root
            lost = first.status().storage.to_json()["locks"]
            assert lost["held"] == [] and lost["lost"][0]["root"] == str(root)
            assert "another daemon took the lock" in lost["lost"][0]["why"]
            assert second.index_files([(root, "late.md")]).files_indexed == 1  # the lock holder does
        finally:
            second.close()
    finally:
        first.close()


def test_a_root_comes_back_when_the_other_daemon_lets_it_go(restartable_pg: Any, tmp_path: Path) -> None:
    root, cfg, first = _indexed_site(restartable_pg, tmp_path)
    try:
        restartable_pg.stop()
        restartable_pg.start()
        second = wait_for(lambda: _open_or_none(cfg), timeout=30, what="a second daemon to take the free lock")
        try:
            first.save()  # its snapshot notices the lock went to the other daemon
            assert first.backend.lost_roots() and not first.take_reconcile_wanted()
        finally:
            second.close()  # ... which stops; meanwhile a file changed that nobody indexed
        (root / "meanwhile.md").write_text("# Meanwhile\n\nWritten while no daemon indexed it.\n", encoding="utf-8")
        # A later snapshot takes the lock back. The other daemon's session may still be ending in the
        # server after its close() returned (advisory locks go with the backend process), so poll.
        wait_for(lambda: first.save() and first.backend.lost_roots() == {}, timeout=30, what="the lock to come back")
        assert first.status().storage.to_json()["locks"] == {"held": [str(root)], "lost": []}
        assert first.take_reconcile_wanted()  # the scheduler asks for a reconcile, which indexes the change
        assert reconcile(first, [root], FILTER).files_indexed == 1
        assert _file_or_none(first, root, "meanwhile.md") == "present"
        with pytest.raises(SiteLockedError):  # and the lock is really this daemon's again
            open_index(cfg, HashEmbedder(64))
    finally:
        first.close()


def _indexed_site(restartable_pg: Any, tmp_path: Path) -> tuple[Path, Config, Any]:
    """A site on the restartable server, its corpus indexed (connect timeout 2 s): root, config, index."""
    root = write_corpus(tmp_path / "root")
    cfg = with_timeout(storage_config("postgres", root, tmp_path / "data", restartable_pg.server.dsn()), 2)
    idx = open_index(cfg, HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
    except BaseException:
        idx.close()
        raise
    return root, cfg, idx


def _open_or_none(cfg: Config) -> Any:
    try:
        return open_index(cfg, HashEmbedder(64))
    except StorageUnavailableError:
        return None


def _file_or_none(idx: Any, root: Path, rel: str) -> str | None:
    try:
        return "absent" if idx.store.file(idx.store.root_id(root), rel) is None else "present"
    except StorageUnavailableError:
        return None


def _try_index(idx: Any, root: Path, rel: str) -> int | None:
    try:
        return int(idx.index_files([(root, rel)]).files_indexed)
    except StorageUnavailableError:
        return None


def _indexed(idx: Any, root: Path, rel: str) -> bool:
    return _try_index(idx, root, rel) == 1


# -- a whole outage, through the daemon ----------------------------------------------------------------


def _chunks_by_path(d: Any) -> dict[str, list[int]]:
    with d.index.backend.pg.connection() as c:
        rows = c.execute("SELECT f.path, array_agg(c.id ORDER BY c.id) FROM memoryd_chunks c"
                         " JOIN memoryd_files f ON f.id = c.file_id GROUP BY f.path").fetchall()
    return {str(p): list(ids) for p, ids in rows}


def _hits(client: Any, query: str) -> set[str]:
    try:
        return {h["path"] for h in client.call("search", {"query": query, "mode": "keyword", "k": 10})["hits"]}
    except RpcClientError as exc:
        assert exc.code == STORAGE_UNAVAILABLE
        return set()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_a_database_outage_end_to_end(restartable_pg: Any, tmp_path: Path, short_dir: Path) -> None:
    dsn = f"{restartable_pg.server.dsn()} password={SECRET}"  # trust auth: accepted, never shown

    def tweak(cfg: Config) -> Config:
        cfg = with_timeout(on_postgres(dsn)(cfg), 2)
        # no line vectors: the count below is of the chunks re-embedded, not of their lines' idle fill
        return dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, line_weight=0.0,
                                                                   context_line_model=False))

    with running_daemon(tmp_path, short_dir / "o.sock", FILES, timeout=30, tweak=tweak) as (d, client, root):
        counting = CountingEmbedder(d.index.embedder)
        d.worker.embedder.inner = counting  # every passage the daemon embeds from now on is counted
        before = _chunks_by_path(d)
        restartable_pg.stop()

        t0 = time.monotonic()
        with pytest.raises(RpcClientError) as err:
            client.call("search", {"query": "Lisbon"})
        assert time.monotonic() - t0 < 10  # the connect timeout (2 s) bounds it, with room for a loaded machine
        assert err.value.code == STORAGE_UNAVAILABLE and SECRET not in str(err.value) + json.dumps(err.value.data)
        assert err.value.data == {"backend": "postgres", "where": d.index.backend.where}

        with pytest.raises(RpcClientError) as err:
            client.call("context", {"query": "Lisbon", "max_tokens": 200})
        assert err.value.code == STORAGE_UNAVAILABLE
        assert "Lisbon" in client.call("get", {"path": "MEMORY.md"})["text"]  # files are read from disk

        st = client.call("status")
        assert st["storage"]["reachable"] is False and st["storage"]["since"] and SECRET not in json.dumps(st)
        assert d.index.backend.where in st["storage"]["last_error"] and "UNREACHABLE" in render_status(st)

        try:
            written = root / client.call("remember", {"content": "The team standup moved to nine thirty."})["path"]
        except RpcClientError:  # the file is written even though indexing it must wait for the database
            written = next(p for p in root.rglob("*.md") if "standup" in p.read_text(encoding="utf-8"))
        assert "standup moved to nine thirty" in written.read_text(encoding="utf-8")
        (root / "notes/tools.md").write_text("# Tools\n\nThe editor of choice is Helix now.\n", encoding="utf-8")
        # both changes reached the worker and failed there: from now on only the daemon's own probe
        # of the database can bring them in
        wait_for(lambda: ready(client) and d.worker.storage_down and d.worker.pending == 0, timeout=30,
                 what="the watcher's batch to fail on the missing database")

        restartable_pg.start()
        wait_for(lambda: {str(written.relative_to(root)), "notes/tools.md"} <= _hits(client, "standup Helix")
                 | _hits(client, "standup") | _hits(client, "Helix"), timeout=20,  # the probe runs every 5 s
                 what="both changes made during the outage to be searchable")
        wait_for(lambda: ready(client), timeout=30, what="the catch-up reconcile to finish")
        after = _chunks_by_path(d)
        unchanged = set(before) - {"notes/tools.md", str(written.relative_to(root))}
        assert unchanged and all(after[p] == before[p] for p in unchanged)  # same rows: nothing re-indexed
        new_chunks = sum(len(after[p]) for p in after if p not in unchanged)
        assert 1 <= counting.embedded <= new_chunks  # only the changed files' chunks went to the model
        st = client.call("status")
        assert st["storage"]["reachable"] is True and st["storage"]["locks"]["held"] == [str(root)]
        other = connect.SiteLock(dsn, "disable", 2)
        try:
            with pytest.raises(SiteLockedError):  # the lock is held again, on the restarted server
                other.acquire(d.index.site, root)
        finally:
            other.close()
