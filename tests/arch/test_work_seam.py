"""``daemon/work`` drives the index through one narrow seam, :class:`memoryd.daemon.work.ports.WritableIndex`
(issue #39 item 6): no module there imports the concrete engine (every import counts, function-level
and ``TYPE_CHECKING`` ones too), and none sets an attribute of the index's parts
(``index.vector_fill.backlog_slice = …``): what the daemon tunes, it tunes through a call.
mypy checks that ``MemoryIndex`` is a ``WritableIndex`` where the daemon hands it to the worker.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORK = Path(__file__).resolve().parents[2] / "daemon" / "work"
MODULES = sorted(p.name for p in WORK.glob("*.py"))


def _tree(name: str) -> ast.Module:
    return ast.parse((WORK / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("module", MODULES)
def test_no_work_module_imports_the_concrete_engine(module: str) -> None:
    tree = _tree(module)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not {m for m in imported if m.startswith("memoryd.indexer.engine") or m.endswith(".MemoryIndex")}


def _names_the_index(node: ast.expr) -> bool:
    """``index`` or ``self.index`` / ``self._index``."""
    if isinstance(node, ast.Name):
        return node.id in ("index", "idx")
    return isinstance(node, ast.Attribute) and node.attr in ("index", "_index") and isinstance(node.value, ast.Name)


@pytest.mark.parametrize("module", MODULES)
def test_no_work_module_sets_an_attribute_of_the_index_or_its_parts(module: str) -> None:
    """``index.x = …`` and ``index.part.x = …`` both reach past the protocol's calls."""
    found = []
    for node in ast.walk(_tree(module)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            owner = target.value
            if _names_the_index(owner) or (isinstance(owner, ast.Attribute) and _names_the_index(owner.value)):
                found.append(f"line {target.lineno}: {ast.unparse(target)}")
    assert found == []
