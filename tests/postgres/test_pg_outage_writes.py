"""Writes survive a PostgreSQL outage (issue #33 item 5): the file is the truth.

``memoryd run`` starts with the database stopped, serves what needs no database, says in
``status`` that storage is unreachable; ``remember`` and ``forget`` edit the file and answer
truthfully (``indexed: false`` with why); when the database starts, the daemon finishes opening
(migrations, identity, its locks) and indexes what changed meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import RpcClientError
from tests.helpers import ready, running_daemon, wait_for
from tests.postgres.test_pg_daemons import on_postgres

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")]

FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n"}


def keyword_paths(client: Any, query: str) -> set[str]:
    try:
        return {h["path"] for h in client.call("search", {"query": query, "mode": "keyword"})["hits"]}
    except RpcClientError:
        return set()


def test_the_daemon_starts_and_writes_while_the_database_is_down(restartable_pg: Any, tmp_path: Path,
                                                                 short_dir: Path) -> None:
    restartable_pg.stop()
    with running_daemon(tmp_path, short_dir / "w.sock", FILES, timeout=20,
                        tweak=on_postgres(restartable_pg.server.dsn())) as (d, client, root):
        st = client.call("status")["storage"]
        assert st["reachable"] is False and "cannot connect" in (st["last_error"] or "")
        with pytest.raises(RpcClientError) as err:
            client.call("search", {"query": "Lisbon", "mode": "keyword"})
        assert err.value.code == -32031
        got = client.call("get", {"path": "MEMORY.md"})  # files need no database
        assert "Lisbon" in got["text"]

        res = client.call("remember", {"content": "The team standup moved to nine thirty."})
        assert res["decision"] == "appended" and res["indexed"] is False and res["index_note"]
        written = root / res["path"]
        assert written.read_text(encoding="utf-8").count("standup moved to nine thirty") == 1
        # a second one to the same file: its duplicate check compares with that file's entries, whose
        # vectors it cannot save in the shared cache (an error on the old code, the file written or not)
        again = client.call("remember", {"content": "The release train leaves on Thursday afternoons."})
        assert again["decision"] == "appended" and again["indexed"] is False and again["path"] == res["path"]
        assert written.read_text(encoding="utf-8").count("release train leaves") == 1
        line = next(i for i, text in enumerate((root / "MEMORY.md").read_text(encoding="utf-8").splitlines(), 1)
                    if "Lisbon" in text)
        gone = client.call("forget", {"path": "MEMORY.md", "line": line})
        assert gone.get("indexed") is False
        assert "Lisbon" not in (root / "MEMORY.md").read_text(encoding="utf-8")

        restartable_pg.start()
        wait_for(lambda: res["path"] in keyword_paths(client, "standup nine thirty"), timeout=60,
                 what="the memory written while the database was down to be indexed")
        assert res["path"] in keyword_paths(client, "release train Thursday")
        wait_for(lambda: ready(client), timeout=30, what="the catch-up reconcile")
        assert keyword_paths(client, "Lisbon river") == set()  # the forgotten line is gone from the index too
        st = client.call("status")["storage"]
        assert st["reachable"] is True and st["locks"]["held"] == [str(root)] and st["refused"] is None
        assert [s["site"] for s in st["all_sites"]] == [d.index.site] and st["all_sites"][0]["live"] is True
