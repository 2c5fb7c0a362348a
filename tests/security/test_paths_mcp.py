"""The path regressions through ``memoryd mcp --session direct --peer eve`` (a real MCP session over stdio).

The MCP tools go through the socket methods, so they inherit the resolver; this proves it end to end,
including the reproduction of issue #15 that needed eve's first ``memory_remember`` to create her folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.client.test_mcp import run_session, text_of
from tests.helpers import ready, wait_for
from tests.security.paths_fixtures import OUTSIDE_WORD, tree


@pytest.mark.slow
def test_mcp_direct_session_cannot_leave_its_peer_folder(tmp_path: Path, short_dir: Path) -> None:
    with tree(tmp_path, short_dir) as (d, client, root, outside):
        (root / "peers/eve").mkdir()
        os.symlink("../bob/MEMORY.md", root / "peers/eve/x.md")
        os.symlink(outside / "secret.md", root / "peers/eve/out.md")
        os.link(root / "peers/bob/MEMORY.md", root / "peers/eve/h.md")
        client.call("reindex", {"wait": True})
        wait_for(lambda: ready(client), what="idle")

        async def body(s: Any) -> dict[str, Any]:
            out = {"remember": await s.call_tool("memory_remember",
                                                 {"content": "Eve prefers written async standups over calls."})}
            for key, path in [("dotdot", "peers/eve/../bob/MEMORY.md"),
                              ("owner", "peers/eve/../../user/preferences.md"),
                              ("abs", f"{root}/peers/eve/../bob/MEMORY.md"), ("link", "peers/eve/x.md"),
                              ("hard", "peers/eve/h.md"), ("out", "peers/eve/out.md"), ("nul", "peers/eve/\x00.md"),
                              ("long", "peers/eve/" + "y" * 5000 + ".md")]:
                out[key] = await s.call_tool("memory_get", {"path": path})
            out["search"] = await s.call_tool("memory_search", {"query": "word file bobwombat outsidesecret",
                                                                "mode": "keyword"})
            out["own"] = await s.call_tool("memory_get", {"path": "peers/eve/MEMORY.md"})
            return out

        out = run_session(d.cfg.socket_path, tmp_path / "mcp.log", body, "--session", "direct", "--peer", "eve")
    assert out["remember"].structuredContent["path"] == "peers/eve/MEMORY.md"
    for key in ("dotdot", "owner", "abs", "link", "hard", "out", "nul", "long"):
        res = out[key]
        assert res.isError, key
        text = text_of(res)
        assert "bobwombat" not in text and "ownerpref" not in text and OUTSIDE_WORD not in text, key
        assert "internal error" not in text, (key, text)
    assert "'..' components are refused" in text_of(out["dotdot"])
    assert text_of(out["link"]).startswith("permission denied") and "hard links" in text_of(out["hard"])
    assert out["search"].structuredContent["results"] == []
    assert "async standups" in out["own"].structuredContent["text"]
