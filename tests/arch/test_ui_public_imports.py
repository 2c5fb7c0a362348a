"""#39 item 8: the UI uses the client's *public* formatters; a private name (``_duration``) imported across
packages is a coupling neither side can see, and it broke once already when render.py changed."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_ui_imports_no_private_name_from_another_package() -> None:
    found = []
    for path in sorted((REPO / "daemon" / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("memoryd.daemon.ui"):
                found += [f"{path.relative_to(REPO)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and a.name != "__future__" and node.module != "__future__"]
    assert found == []
