"""Reads are audited like writes (seed 003): who, which method, where, how many hits — never the query or content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.read_audit import READS_NAME
from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED
from tests.helpers import running_daemon

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
ALICE = {"kind": "direct", "peer": "alice"}
QUERY = "quokkamigrationplan"
FILES = {
    "peers/alice/MEMORY.md": "## Notes\n\n- Alice studies the quokkamigrationplan of the zoo.\n",
    "peers/bob/MEMORY.md": "## Notes\n\n- Bob keeps the quokkamigrationplan budget private.\n",
    "MEMORY.md": "# Memory\n\n- The quokkamigrationplan starts in May.\n",
}


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20) as started:
        yield started


def _reads(client: Client, n: int = 50) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = client.call("audit", {"tail": n, "log": "reads"})["entries"]
    return [e for e in out if e.get("action") != "audit"]


def test_every_read_method_leaves_one_record_without_the_query_or_content(daemon) -> None:
    d, client, _root = daemon
    client.call("search", {"query": QUERY, "mode": "keyword"})
    client.call("search", {"query": QUERY, "mode": "keyword", "session": ALICE})
    client.call("context", {"query": QUERY, "max_tokens": 400, "session": ALICE})
    client.call("get", {"path": "peers/alice/MEMORY.md", "session": ALICE})
    client.call("list", {"namespace": "peer:alice"})
    client.call("export", {"format": "jsonl", "namespace": "peer:bob"})
    client.call("files", {})
    client.call("stats", {})
    with pytest.raises(RpcClientError) as e:
        client.call("get", {"path": "peers/bob/MEMORY.md", "session": ALICE})
    assert e.value.code == ACCESS_DENIED
    recs = _reads(client)
    assert [r["action"] for r in recs] == ["search", "search", "context", "get", "list", "export", "files", "stats",
                                           "get"]
    owner_search, alice_search, ctx, get, listed, exported, files, _stats, denied = recs
    assert owner_search["session"] == {"kind": "owner"} and owner_search["hits"] == 3
    assert alice_search["session"] == ALICE and alice_search["hits"] == 1
    assert alice_search["paths"] == ["peers/alice/MEMORY.md"]  # what the peer actually saw
    assert ctx["hits"] >= 1 and ctx["decision"] == "read"
    assert (get["path"], get["hits"]) == ("peers/alice/MEMORY.md", 3)
    assert listed["namespace"] == "peer:alice" and listed["hits"] == 1
    assert exported["namespace"] == "peer:bob" and exported["hits"] == 1
    assert files["hits"] == 3
    assert (denied["decision"], denied["code"]) == ("denied", ACCESS_DENIED)
    raw = (d.cfg.data_dir / READS_NAME).read_text()
    assert QUERY not in raw and "zoo" not in raw and "budget" not in raw  # neither the query nor any content
    writes = client.call("audit", {"tail": 50})["entries"]
    assert not [w for w in writes if w.get("action") in ("search", "get", "context")]  # reads never rotate writes


def test_the_read_audit_is_private_and_bounded(daemon) -> None:
    d, client, _root = daemon
    client.call("search", {"query": QUERY, "mode": "keyword"})
    path = d.cfg.data_dir / READS_NAME
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(RpcClientError) as e:
        client.call("audit", {"tail": 5, "log": "reads", "session": ALICE})
    assert e.value.code == ACCESS_DENIED  # the audit is the owner's
    with pytest.raises(RpcClientError):
        client.call("audit", {"tail": 5, "log": "everything"})
    assert json.loads(path.read_text().splitlines()[-1])["action"] == "search"


def test_the_cli_shows_the_read_audit(daemon, capsys: pytest.CaptureFixture[str]) -> None:
    from memoryd.daemon.client import cli

    d, client, _root = daemon
    client.call("search", {"query": QUERY, "mode": "keyword", "session": ALICE})
    assert cli.main(["audit", "--socket", str(d.cfg.socket_path), "--reads", "-n", "5"]) == 0
    out = capsys.readouterr().out
    assert "direct:alice" in out and "search" in out and "1 hits" in out and QUERY not in out


def test_context_takes_a_mode_over_the_socket(daemon) -> None:
    _d, client, _root = daemon
    kw = client.call("context", {"query": QUERY, "max_tokens": 400, "mode": "keyword"})
    assert "quokkamigrationplan" in kw["text"]
    with pytest.raises(RpcClientError):
        client.call("context", {"query": QUERY, "max_tokens": 400, "mode": "telepathy"})

