"""Secrets in namespace names and file names (issue #38, item 19).

The filter ran on what an entry says, never on where it lives: a namespace ``peer:ghp_…``
was written, and a file named for a token was returned whole in hits, list and export.
Now a namespace that would put a secret in a path is refused at write time, and a path
already on disk is shown redacted in every reply.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.config import Config
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

SECRET = "ghp_Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bA"
FILES = {
    f"peers/{SECRET}/MEMORY.md": "## Decisions\n\n- The zebra team deploys on Thursdays.\n",
    f"notes/{SECRET}.md": "# Notes\n\n- The zebra office is in Porto.\n",
    "MEMORY.md": "# Memory\n\n- The user prefers green tea.\n",
}


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(
            cfg.write, **{**HASH_WRITE, "max_per_minute": 1000}))  # type: ignore[arg-type]

    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak) as started:
        yield started


def test_a_namespace_holding_a_secret_is_refused_at_write_time(daemon: Any) -> None:
    _d, client, root = daemon
    res = client.call("remember", {"content": "The release train leaves every second Monday.",
                                   "namespace": "agent:ghp_Aq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bZ"})
    assert (res["decision"], res["stage"], res["rule"]) == ("rejected", "privacy", "github_token")
    assert "ghp_Aq9" not in json.dumps(res)  # the refusal does not repeat it
    assert not (root / "agent" / "ghp_Aq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bZ").exists()


def test_paths_on_disk_holding_a_secret_are_redacted_in_every_reply(daemon: Any) -> None:
    _d, client, _root = daemon
    search = client.call("search", {"query": "zebra", "k": 5, "mode": "keyword"})
    paths = {h["path"] for h in search["hits"]}
    assert paths == {"peers/[REDACTED:github_token]/MEMORY.md", "notes/[REDACTED:github_token].md"}
    context = client.call("context", {"query": "zebra", "mode": "keyword", "max_tokens": 500})
    listed = client.call("list", {"limit": 50})
    assert {e["path"] for e in listed["entries"]} >= {"notes/[REDACTED:github_token].md"}
    assert "peer:[REDACTED:github_token]" in {e["namespace"] for e in listed["entries"]}
    jsonl = client.call("export", {"format": "jsonl"})
    markdown = client.call("export", {"format": "markdown"})
    stats = client.call("stats", {})
    assert "peer:[REDACTED:github_token]" in stats["namespaces"]
    for reply in (search, context, listed, jsonl, markdown, stats):
        assert SECRET not in json.dumps(reply), reply
    assert "[REDACTED:github_token]" in context["text"] and "[REDACTED:github_token]" in markdown["text"]
    # a path without a secret is untouched
    assert "MEMORY.md" in {e["path"] for e in listed["entries"]}
