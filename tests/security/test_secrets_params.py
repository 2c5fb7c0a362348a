"""Issue #28 item 7: no secret leaves through request parameters or raw reads.

* A secret put in a *parameter* (a namespace, a section title, a path, a path prefix, a
  peer id) is written neither to ``audit.jsonl`` nor to the daemon's log, whatever the
  method answers (the record and the log line are still there, with the secret redacted).
* A confined session's ``get``, ``list``, ``export`` and the MCP resources redact a file's
  text exactly as ``search`` does (the index's ``write.redact_index`` redaction); the owner
  still reads the file as written.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.mcp_server import DaemonBridge
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.logs import configure_logging, reset_logging
from memoryd.indexer.config import Config
from memoryd.indexer.redaction import privacy
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
ALICE = {"kind": "direct", "peer": "alice"}
TOKEN = "ghp_Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bA"
KEY = "sk-proj-Pa7rAm5Secr3tKeyAbCdEfGh1234"
PASSWORD = "Nas!Adm1n77"
ALICE_MEMORY = (f"## Accounts\n\n- The NAS admin password is {PASSWORD} since March.\n"
                f"- CI pushes with {TOKEN} on the release branch.\n\n"
                "## Current Focus\n\n- Reviewing the billing schema.\n")
FILES = {"peers/alice/MEMORY.md": ALICE_MEMORY, "MEMORY.md": "## Decisions\n\n- Use Postgres for billing.\n"}


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(
            cfg.write, **{**HASH_WRITE, "max_per_minute": 1000, "max_per_turn": 1000}))  # type: ignore[arg-type]

    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak) as started:
        yield started


def _refused(client: Client, method: str, params: dict[str, Any]) -> None:
    with pytest.raises(RpcClientError):
        client.call(method, params)


# -- parameters ---------------------------------------------------------------------------------------


def test_secrets_in_parameters_reach_neither_the_audit_log_nor_the_log(daemon) -> None:
    d, client, _root = daemon
    stream = io.StringIO()
    configure_logging("debug", "json", stream)
    try:
        answers = []
        answers.append(client.call("remember", {"content": "The staging build runs nightly at two.",
                                                "namespace": f"peer:{KEY}"}))
        _refused(client, "remember", {"content": "The deploy window is Tuesday.", "namespace": f"bogus:{KEY}"})
        _refused(client, "update_section", {"path": "MEMORY.md", "section": f"Token {TOKEN}", "content": "- x"})
        _refused(client, "forget", {"path": f"notes/{KEY}.md", "line": 1})
        _refused(client, "get", {"path": f"notes/{KEY}.md"})
        answers.append(client.call("files", {"path_prefix": f"peers/{KEY}/", "limit": 1}))
        _refused(client, "remember", {"content": "The office moved to Porto.",
                                      "session": {"kind": "direct", "peer": f"password={PASSWORD}"},
                                      "namespace": "peer:bob"})
        tail = client.call("audit", {"tail": 200})["entries"]  # also writes the counted refusals' summaries
    finally:
        reset_logging()
    written = (d.cfg.data_dir / "audit.jsonl").read_text(encoding="utf-8")
    logged = stream.getvalue()
    assert answers and written.count("\n") >= 5 and logged.count("\n") >= 3  # the records and lines are there
    for secret in (KEY, TOKEN, PASSWORD, "Pa7rAm5Secr3t", "Zq9XwV8uT7sR6pO5"):
        assert secret not in written, (secret, written)
        assert secret not in logged, (secret, logged)
    assert "[REDACTED:" in written
    assert {r["action"] for r in tail} >= {"remember", "update_section", "forget"}
    assert not any(s in json.dumps(tail, ensure_ascii=False) for s in (KEY, TOKEN, PASSWORD))


# -- confined reads --------------------------------------------------------------------------------------


def _secrets_in(text: str) -> list[str]:
    return [s for s in (PASSWORD, TOKEN, "Zq9XwV8uT7sR6pO5") if s in text]


def test_confined_get_list_export_and_resources_redact_as_search_does(daemon) -> None:
    d, client, root = daemon
    level = d.cfg.write.redact_index
    raw = (root / "peers/alice/MEMORY.md").read_text(encoding="utf-8")
    expected = privacy.redact(raw, level)
    assert _secrets_in(raw) and not _secrets_in(expected)

    hits = client.call("search", {"query": "NAS admin password CI pushes", "mode": "keyword", "session": ALICE})
    searched = "\n".join(h["text"] for h in hits["hits"])
    assert hits["hits"] and "[REDACTED:" in searched and not _secrets_in(searched)

    got = client.call("get", {"path": "peers/alice/MEMORY.md", "session": ALICE})
    assert got["text"] == expected  # the redaction of search, the file's lines kept
    part = client.call("get", {"path": "peers/alice/MEMORY.md", "start_line": 3, "end_line": 4, "session": ALICE})
    assert part["text"] == "".join(line + "\n" for line in expected.split("\n")[2:4])

    listed = client.call("list", {"session": ALICE, "limit": 50})["entries"]
    assert listed and not _secrets_in(json.dumps(listed))
    assert any("[REDACTED:" in e["text"] for e in listed)
    for fmt in ("jsonl", "markdown"):
        exported = client.call("export", {"session": ALICE, "format": fmt})["text"]
        assert "[REDACTED:" in exported and not _secrets_in(exported), fmt

    bridge = DaemonBridge(d.cfg.socket_path, ALICE)
    uri = (root / "peers/alice/MEMORY.md").as_uri()
    assert bridge.read_resource(uri) == expected
    _text, tool_list = bridge.call_tool("memory_list", {"limit": 50})
    assert not _secrets_in(json.dumps(tool_list))


def test_the_owner_still_reads_the_file_as_written(daemon) -> None:
    _d, client, root = daemon
    raw = (root / "peers/alice/MEMORY.md").read_text(encoding="utf-8")
    assert client.call("get", {"path": "peers/alice/MEMORY.md"})["text"] == raw
    exported = client.call("export", {"namespace": "peer:alice", "format": "markdown"})["text"]
    assert PASSWORD in exported and TOKEN in exported
