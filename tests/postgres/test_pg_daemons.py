"""Two daemons (two data dirs, two sites) sharing one PostgreSQL: saves travel, the cache is shared,
and a database that goes away costs no memory (``remember`` still writes the file)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.indexer.config import Config
from tests.helpers import running_daemon, wait_for
from tests.write_fixtures import HASH_WRITE

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")]

FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n"}


def on_postgres(dsn: str) -> Any:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(
            cfg, storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn, sslmode="disable"),
            write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    return tweak


def paths_found(client: Any, query: str) -> set[str]:
    return {h["path"] for h in client.call("search", {"query": query, "mode": "keyword", "k": 20})["hits"]}


def test_a_save_on_site_a_is_searchable_from_site_b(pg_dsn: str, tmp_path: Path, short_dir: Path) -> None:
    with running_daemon(tmp_path / "a", short_dir / "a.sock", FILES, timeout=20, tweak=on_postgres(pg_dsn)) as (
        a, _ca, root_a,
    ), running_daemon(tmp_path / "b", short_dir / "b.sock", FILES, timeout=20, tweak=on_postgres(pg_dsn)) as (
        b, cb, _root_b,
    ):
        st = cb.call("status")
        assert st["storage"]["backend"] == "postgres" and st["storage"]["sites"] == 2
        assert st["cache"]["misses"] == 0  # B's copy of MEMORY.md: every vector came from A's cache entries
        t0 = time.monotonic()
        (root_a / "deploys.md").write_text("# Deploys\n\nProduction deploys freeze on Fridays.\n", encoding="utf-8")
        wait_for(lambda: "deploys.md" in paths_found(cb, "production deploys freeze"), timeout=10,
                 what="A's save to be searchable from B")
        took = time.monotonic() - t0
        assert took < 10  # bench/pg_sites.py measures the p95; this only proves it travels
        assert a.index.site != b.index.site
        mine = cb.call("search", {"query": "production deploys freeze", "mode": "keyword", "sites": ["self"]})
        assert "deploys.md" not in {h["path"] for h in mine["hits"]}
        theirs = cb.call("search", {"query": "production deploys freeze", "mode": "keyword",
                                    "sites": [a.index.site]})
        assert {h["path"] for h in theirs["hits"]} == {"deploys.md"}
        with pytest.raises(RpcClientError, match="sites"):
            cb.call("search", {"query": "x", "sites": []})


def test_sites_is_refused_by_the_embedded_backend(tmp_path: Path, short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "e.sock", FILES, timeout=20) as (_d, client, _root), \
            pytest.raises(RpcClientError, match=r"storage\.backend = 'postgres'"):
        client.call("search", {"query": "Lisbon", "sites": ["self"]})


def test_remember_writes_the_file_while_the_database_is_down(restartable_pg: Any, tmp_path: Path,
                                                            short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20,
                        tweak=on_postgres(restartable_pg.server.dsn())) as (_d, client, root):
        restartable_pg.stop()
        with pytest.raises(RpcClientError, match="database postgresql://"):
            client.call("search", {"query": "Lisbon", "mode": "keyword"})
        res = client.call("remember", {"content": "The team standup moved to nine thirty."})
        assert res["decision"] == "appended" and res["indexed"] is False  # the truth: written, not yet searchable
        written = root / res["path"]
        assert written.read_text().count("standup moved to nine thirty") == 1
        assert client.call("status")["storage"]["reachable"] is False
        restartable_pg.start()
        wait_for(lambda: "standup" in " ".join(
            h["text"] for h in _search_or_empty(client, "standup nine thirty")), timeout=60,
            what="the file written while down to be indexed once the database is back")
        assert os.path.exists(written)


def _search_or_empty(client: Any, query: str) -> list[dict[str, Any]]:
    try:
        return list(client.call("search", {"query": query, "mode": "keyword"})["hits"])
    except RpcClientError:
        return []


def test_the_mcp_search_tool_passes_sites_through() -> None:
    from memoryd.daemon.client.mcp_server import DaemonBridge
    from memoryd.daemon.client.mcp_tools import BY_NAME, ToolError, check_arguments

    args = check_arguments(BY_NAME["memory_search"], {"query": "deploys", "sites": ["self", "ci"]})
    method, params = DaemonBridge("/nonexistent/s.sock").request("memory_search", args)
    assert method == "search" and params["sites"] == ["self", "ci"]
    with pytest.raises(ToolError):
        check_arguments(BY_NAME["memory_search"], {"query": "deploys", "sites": []})
