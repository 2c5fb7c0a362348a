"""The write path as wired into the daemon: handler map, read scoping, CLI, index-time redaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client import cli
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED
from tests.helpers import running_daemon

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
SECRET = "ghp_Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bA"


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    files = {"peers/alice/MEMORY.md": "- Alice likes the quokka mascot.\n",
             "peers/bob/MEMORY.md": "- Bob likes the quokka plushie.\n",
             "MEMORY.md": f"# Memory\n\n- The quokka deploy token is {SECRET} for CI.\n"}
    with running_daemon(tmp_path, short_dir / "m.sock", files, timeout=20) as started:
        yield started


def test_remember_is_served_by_the_daemon(daemon) -> None:
    _d, client, _root = daemon
    res = client.call("remember", {"content": "Alice prefers async standups.", "session": {"kind": "direct",
                                                                                         "peer": "alice"}})
    assert res["decision"] == "appended" and res["path"] == "peers/alice/MEMORY.md"


def test_reads_are_scoped_by_session(daemon) -> None:
    _d, client, _root = daemon
    alice = {"kind": "direct", "peer": "alice"}
    hits = client.call("search", {"query": "quokka", "mode": "keyword", "session": alice})["hits"]
    assert [h["path"] for h in hits] == ["peers/alice/MEMORY.md"]
    assert len(client.call("search", {"query": "quokka", "mode": "keyword"})["hits"]) == 3  # the owner
    cases: list[tuple[str, dict[str, object]]] = [
                           ("search", {"query": "quokka", "path_prefix": "peers/bob/"}),
                           ("get", {"path": "peers/bob/MEMORY.md"}), ("get", {"path": "MEMORY.md"}),
                           ("context", {"query": "quokka", "max_tokens": 200, "path_prefix": "MEMORY.md"})]
    for method, params in cases:
        with pytest.raises(RpcClientError) as e:
            client.call(method, {**params, "session": alice})
        assert e.value.code == ACCESS_DENIED, (method, params)
    assert client.call("get", {"path": "peers/alice/MEMORY.md", "session": alice})["text"].startswith("- Alice")


def test_secrets_are_redacted_before_the_index(daemon) -> None:
    d, client, root = daemon
    text = next(h["text"] for h in client.call("search", {"query": "quokka deploy", "mode": "keyword"})["hits"]
                if h["path"] == "MEMORY.md")
    assert "[REDACTED:github_token]" in text and SECRET not in text
    d.index.save(force=True)
    for f in d.cfg.data_dir.rglob("*"):
        assert not f.is_file() or SECRET.encode() not in f.read_bytes(), f
    assert SECRET in (root / "MEMORY.md").read_text()  # the file itself is never touched


def test_cli_has_the_write_commands(daemon, capsys: pytest.CaptureFixture[str]) -> None:
    d, _client, _root = daemon
    rc = cli.main(["remember", "--socket", str(d.cfg.socket_path), "--json", "We decided to ship on Fridays."])
    assert rc == 0 and '"decision": "appended"' in capsys.readouterr().out
    assert cli.main(["audit", "--socket", str(d.cfg.socket_path), "--tail", "1"]) == 0
