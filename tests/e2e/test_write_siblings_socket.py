"""Sibling facts through the socket, the CLI and MCP (issue #37 item 1): both stay in the file, the second
answer names the first as its ``sibling``, and ``explain`` says why (subject, slot, the words that differ)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.write_fixtures import start_write_daemon

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
FREE = "The API rate limit for the free tier is 100 requests per minute."
PRO = "The API rate limit for the pro tier is 1000 requests per minute."
PRO_NOW = "The API rate limit for the pro tier is now 2000 requests per minute."


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Path]]:
    wd = start_write_daemon(tmp_path, short_dir, max_per_turn=10)  # several writes in one turn
    try:
        yield wd.client, wd.root
    finally:
        wd.close()


def test_a_sibling_is_kept_beside_the_first_and_explained(daemon) -> None:
    client, root = daemon
    first = client.call("remember", {"content": FREE})
    second = client.call("remember", {"content": PRO, "explain": True})
    assert first["decision"] == "appended" and second["decision"] == "appended"
    text = (root / second["path"]).read_text()
    assert FREE in text and PRO in text
    rel = second["related"]
    assert (rel["flag"], rel["path"], rel["line"]) == ("sibling", first["path"], first["line"])
    ex = second["explain"]
    assert ex["flag"] == "sibling" and ex["candidate"]["line"] == first["line"]
    assert ex["slots"]["verdict"] == "sibling" and "free → pro" in ex["slots"]["differs"]
    # an update of the pro tier replaces the pro tier's entry, and only it
    third = client.call("remember", {"content": PRO_NOW})
    assert (third["decision"], third["previous"]) == ("replaced", PRO)
    text = (root / third["path"]).read_text()
    assert FREE in text and PRO_NOW in text and PRO not in text


@pytest.mark.slow
def test_the_cli_explains_a_sibling(daemon, tmp_path: Path) -> None:
    client, _root = daemon
    client.call("remember", {"content": FREE})
    out = subprocess.run([sys.executable, "-m", "memoryd", "remember", "--socket", client.path, "--explain", PRO],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.startswith("appended: ") and "sibling: " in out
    assert "subject: api rate limit free tier; slot: is; differs: free → pro" in out


@pytest.mark.slow
def test_mcp_keeps_both_siblings(daemon, tmp_path: Path) -> None:
    from tests.client.test_mcp import run_session

    client, root = daemon

    async def body(s: Any) -> list[Any]:
        return [(await s.call_tool("memory_remember", {"content": c})).structuredContent for c in (FREE, PRO)]

    first, second = run_session(client.path, tmp_path / "mcp.log", body)
    assert (first["decision"], second["decision"]) == ("appended", "appended")
    assert second["related"]["flag"] == "sibling"
    text = (root / second["path"]).read_text()
    assert FREE in text and PRO in text
