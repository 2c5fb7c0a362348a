"""``memory_remember`` over MCP says what a replace or a reinforcement changed (issue #37, item 5):
the entry as it was (``previous``) and the undo id (``history_id``), in the structured result and
in the text the model reads.

Measured on 2f88dd6: a 'reinforced' result had no ``previous``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memoryd.indexer.config import Config
from tests.client.test_mcp import run_session, text_of
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
VIM, NEOVIM = "The user prefers Vim as their editor.", "The user prefers Neovim as their editor."
DARK = "The user prefers dark mode in every app."


@pytest.fixture
def sock(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Path, Path]]:
    def tweak(cfg: Config) -> Config:  # thresholds for the hash embedder's scores; four writes in one turn
        write = dataclasses.replace(cfg.write, **HASH_WRITE, max_per_turn=10)  # type: ignore[arg-type]
        return dataclasses.replace(cfg, write=write)

    with running_daemon(tmp_path, short_dir / "m.sock", {"MEMORY.md": "# Memory\n"}, timeout=20,
                        tweak=tweak) as (d, client, root):
        client.close()
        yield d.cfg.socket_path, root


@pytest.mark.slow
def test_replaced_and_reinforced_results_carry_the_entry_before_and_the_undo_id(sock, tmp_path: Path) -> None:
    path, root = sock

    async def body(s: Any) -> dict[str, Any]:
        schema = next(t for t in (await s.list_tools()).tools if t.name == "memory_remember").outputSchema
        out: dict[str, Any] = {"schema": schema}
        for key, content in (("vim", VIM), ("dark", DARK), ("replaced", NEOVIM),
                             ("reinforced", "the user prefers dark mode in every app")):
            out[key] = await s.call_tool("memory_remember", {"content": content})
        return out

    out = run_session(path, tmp_path / "mcp.log", body)
    assert not any(out[k].isError for k in ("vim", "dark", "replaced", "reinforced"))
    rep, rein = out["replaced"].structuredContent, out["reinforced"].structuredContent
    assert (rep["decision"], rep["previous"]) == ("replaced", VIM) and rep["history_id"].startswith("h-")
    assert (rein["decision"], rein["previous"]) == ("reinforced", DARK) and rein["history_id"].startswith("h-")
    for key in ("replaced", "reinforced"):
        assert json.loads(text_of(out[key])) == out[key].structuredContent  # the model reads the same
        Draft202012Validator(out["schema"]).validate(out[key].structuredContent)
    assert "previous" in out["schema"]["properties"] and "description" in out["schema"]["properties"]["previous"]
    text = (root / rep["path"]).read_text()
    assert NEOVIM in text and VIM not in text
