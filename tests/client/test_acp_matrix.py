"""Seed 003's access matrix, measured through the socket and checked against the table in docs/security.md.

Each row of the table (between the ``acp-matrix`` markers) is one operation, each column a session kind; the
test runs every cell against a real in-process daemon and compares what happened with the table's ✅ / ❌, so
the documented matrix is the measured one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED
from tests.helpers import running_daemon

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SESSIONS: dict[str, dict[str, str] | None] = {
    "owner": None, "direct": {"kind": "direct", "peer": "alice"}, "group": {"kind": "group", "group": "dev"},
}
FILES = {
    "MEMORY.md": "# Memory\n\n## Current Focus\n\n- The owner's own note about kiwis.\n",
    "peers/alice/MEMORY.md": "# Alice\n\n## Current Focus\n\n- Alice likes kiwis.\n",
    "peers/bob/MEMORY.md": "# Bob\n\n## Current Focus\n\n- Bob likes kiwis too.\n",
    "groups/dev/MEMORY.md": "# Dev\n\n## Current Focus\n\n- The dev group ships kiwis.\n",
}
OWN = {"owner": "MEMORY.md", "direct": "peers/alice/MEMORY.md", "group": "groups/dev/MEMORY.md"}
Op = Callable[[Client, str, dict[str, Any]], Any]


def _with(session: dict[str, str] | None, params: dict[str, Any]) -> dict[str, Any]:
    return params if session is None else {**params, "session": session}


OPS: dict[str, Op] = {
    "read its own namespace": lambda c, k, s: c.call("get", _with(s, {"path": OWN[k]})),
    "read a peer's namespace": lambda c, k, s: c.call("get", _with(s, {"path": "peers/bob/MEMORY.md"})),
    "read a group's namespace": lambda c, k, s: c.call("get", _with(s, {"path": "groups/dev/MEMORY.md"}))
    if k != "group" else c.call("get", _with(s, {"path": "groups/ops/MEMORY.md"})),
    "remember into its own namespace": lambda c, k, s: c.call("remember", _with(s, {
        "content": f"The {k} session noted that the kiwi crates arrive on Tuesday."})),
    "remember into another namespace": lambda c, k, s: c.call("remember", _with(s, {
        "content": "The kiwi crates are stored in hall seven.", "namespace": "peer:bob"})),
    "forget": lambda c, k, s: c.call("forget", _with(s, {"path": OWN[k], "line": 5})),
    "update_section": lambda c, k, s: c.call("update_section", _with(s, {
        "path": OWN[k], "section": "Current Focus", "content": "- Crating kiwis."})),
    "promote": lambda c, k, s: c.call("promote", _with(s, {"path": "peers/alice/MEMORY.md", "line": 5})),
    "clear": lambda c, k, s: c.call("clear", _with(s, {"namespace": "peer:bob"})),
    "import": lambda c, k, s: c.call("import", _with(s, {"data": '{"text": "Kiwis ripen in a paper bag."}\n',
                                                          "dry_run": True})),
    "history, undo": lambda c, k, s: c.call("history", _with(s, {})),
    "audit (writes and reads)": lambda c, k, s: c.call("audit", _with(s, {"tail": 1})),
}


def documented() -> dict[str, dict[str, bool]]:
    """The table in docs/security.md: operation -> session kind -> allowed."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- acp-matrix -->")[1].split("<!-- /acp-matrix -->")[0]
    rows = [r for r in block.strip().splitlines() if r.startswith("|")][2:]
    out = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out[re.sub(r"`", "", cells[0])] = {k: cells[i + 1].startswith("✅") for i, k in enumerate(SESSIONS)}
    return out


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, bool]]]:
    tmp = tmp_path_factory.mktemp("acp")
    short = Path("/tmp") / f"acp-{id(tmp) % 100000}"
    short.mkdir(exist_ok=True)
    out: dict[str, dict[str, bool]] = {}
    try:
        with running_daemon(tmp, short / "m.sock", FILES, timeout=20) as started:
            _d, client, _root = started
            for name, op in OPS.items():
                for kind, session in SESSIONS.items():
                    try:
                        op(client, kind, session)
                        out.setdefault(name, {})[kind] = True
                    except RpcClientError as exc:
                        if exc.code != ACCESS_DENIED:
                            raise AssertionError(f"{name} as {kind}: {exc.code} {exc.message}") from None
                        out.setdefault(name, {})[kind] = False
            yield out
    finally:
        import shutil

        shutil.rmtree(short, ignore_errors=True)


def test_the_documented_matrix_is_the_measured_one(measured: dict[str, dict[str, bool]]) -> None:
    assert documented() == measured


def test_the_matrix_is_seed_003s(measured: dict[str, dict[str, bool]]) -> None:
    """The seed's rules, independent of the doc: update_*, promote and reads of others are the owner's."""
    for op in ("update_section", "promote", "forget", "clear", "import", "history, undo", "audit (writes and reads)",
               "read a peer's namespace", "read a group's namespace", "remember into another namespace"):
        assert measured[op] == {"owner": True, "direct": False, "group": False}, op
    assert measured["read its own namespace"] == measured["remember into its own namespace"] == dict.fromkeys(
        SESSIONS, True)
