"""The socket's vocabulary (memoryd.daemon.api.vocabulary) is the one list of methods and what they may do.

Everything that used to keep its own copy derives from it: the session gate, the read audit, the
parsers' accepted keys, the CLI's modes, MCP's read-only hints and defaults, the UI's search form.
These tests pin the derived values to what the copies said (behaviour unchanged) and keep the
table dependency-free, so the clients can import it without loading the server.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from memoryd.daemon.api import vocabulary as vocab

REPO = Path(__file__).resolve().parents[2]


def test_the_vocabulary_imports_nothing_but_the_standard_library() -> None:
    """The CLI, the MCP bridge and the UI import it: it must not pull the server (or numpy) in."""
    tree = ast.parse((REPO / "daemon" / "api" / "vocabulary.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names
    package = ast.parse((REPO / "daemon" / "api" / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(package) if isinstance(n, ast.Import | ast.ImportFrom)]  # importing it is free


def test_the_gate_and_the_read_audit_take_their_sets_from_the_table() -> None:
    """The sets session.py and read_audit.py spelled out before, now derived: the same members."""
    from memoryd.daemon.api import read_audit, session

    assert {"search", "context", "get", "files", "list", "export", "stats", "remember",
            "bank_propose", "bank_reply"} == session.BOUND_METHODS  # bank_reply writes only through remember
    assert session.BOUND_METHODS is vocab.BOUND_METHODS
    assert {"search", "context", "get", "files", "list", "export", "stats"} == vocab.READ_AUDITED
    assert not hasattr(read_audit, "READS")  # no second list to drift


def test_one_search_mode_list_and_one_default_k_for_every_client() -> None:
    from memoryd.daemon.client import cli, mcp_tools
    from memoryd.indexer.config import SEARCH_MODES, SearchConfig

    assert vocab.SEARCH_MODES == SEARCH_MODES  # the library's Literal, spelled for the clients
    assert SearchConfig().k == vocab.DEFAULT_K  # what the daemon uses when a request names no k
    assert cli.SEARCH_MODES is vocab.SEARCH_MODES
    schema = mcp_tools.SEARCH.schema["properties"]
    assert schema["k"]["default"] == vocab.DEFAULT_K and schema["mode"]["enum"] == list(vocab.SEARCH_MODES)


def test_the_ui_search_form_uses_the_same_modes_and_k() -> None:
    pytest.importorskip("starlette", reason="the ui extra is not installed")
    from memoryd.daemon.ui import routes

    assert (routes.SEARCH_MODES, routes.DEFAULT_K) == (vocab.SEARCH_MODES, vocab.DEFAULT_K)


def test_mcp_read_only_hints_follow_each_methods_access() -> None:
    from memoryd.daemon.client.mcp_tools import TOOLS

    assert {t.name: t.read_only for t in TOOLS} == {t.name: vocab.BY_NAME[t.method].access == "read" for t in TOOLS}


def test_a_handler_without_a_row_or_a_row_without_a_handler_is_named() -> None:
    names = [m.name for m in vocab.METHODS]
    assert vocab.unlisted(names) == ([], [])
    assert vocab.unlisted([*names, "teleport"]) == (["teleport"], [])
    assert vocab.unlisted(names[1:]) == ([], [names[0]])
