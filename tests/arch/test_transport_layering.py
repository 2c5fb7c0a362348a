"""The transport (``daemon/rpc``) knows no application (issue #39 item 8).

It moves JSON-RPC lines for whoever hands it a handler table: it imports nothing of the socket
methods (``daemon/api``: the session gate, the audits), of the write pipeline or of a storage
backend. Errors say their own code (``MemorydError.rpc_code``/``rpc_data``), and which uid reaches
which methods arrives as ``Admission.handlers_for(peer)``. Every import counts here, those inside
functions and under ``TYPE_CHECKING`` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memoryd.daemon.rpc.jsonrpc import Peer, Request, dispatch
from memoryd.indexer.errors import MemorydError

RPC = Path(__file__).resolve().parents[2] / "daemon" / "rpc"
ALLOWED = ("memoryd.daemon.rpc", "memoryd.indexer.errors")  # itself, and the error base its errors carry


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return out | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}


@pytest.mark.parametrize("module", sorted(p.name for p in RPC.glob("*.py")))
def test_the_transport_imports_nothing_of_the_application(module: str) -> None:
    ours = {m for m in _imports(RPC / module) if m.startswith("memoryd")}
    assert {m for m in ours if not m.startswith(ALLOWED)} == set()


def test_an_error_answers_with_the_code_and_data_it_carries() -> None:
    """No error type is mapped in the transport: a new coded error needs no change there."""

    class Coded(MemorydError):
        rpc_code = -32099

        def rpc_data(self) -> dict[str, str]:
            return {"what": "it says"}

    def fail(params: dict[str, object], peer: Peer) -> None:
        raise Coded("coded failure")

    line = dispatch(Request("m", {}, 1, False), {"m": fail}, Peer(1, 2, 3))
    assert line is not None
    assert b'"code":-32099' in line and b'"data":{"what":"it says"}' in line and b"coded failure" in line


def test_a_storage_outage_carries_its_own_code() -> None:
    from memoryd.daemon.rpc.errors import STORAGE_UNAVAILABLE
    from memoryd.indexer.storage.base import StorageUnavailableError

    exc = StorageUnavailableError("database down", backend="postgres", where="db")
    assert (exc.rpc_code, exc.rpc_data()) == (STORAGE_UNAVAILABLE, {"backend": "postgres", "where": "db"})
