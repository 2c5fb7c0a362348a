"""The formats of ``export`` and ``import``: JSONL entries and a Markdown bundle.

Export writes one JSON object per line, the same fields ``list`` shows
(:class:`memoryd.indexer.write.entries.EntryInfo`), so a file exported from one
memory imports into another: ``import`` reads ``text`` (or ``content``), and
``type`` and ``namespace`` when present; every other field is ignored (paths and
lines are where the entry *was*; the router and dedup decide where it goes now).

The Markdown bundle is for people and other tools: every file of the namespace,
whole, each after a ``<!-- memoryd:file PATH (NAMESPACE) -->`` line. It is not an
import format: a file's structure (USER blocks, sections) is not a list of memories.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.indexer.write.entries import EntryInfo, MemoryFile

JSONL, MARKDOWN = "jsonl", "markdown"
FORMATS = (JSONL, MARKDOWN)


@dataclass(frozen=True)
class ImportItem:
    """One line of an import: its 1-based line number and what it asks to remember."""

    line: int
    text: str
    type: str | None
    namespace: str | None


@dataclass(frozen=True)
class BadLine:
    """A line that is not an entry: not JSON, not an object, or without a usable ``text``."""

    line: int
    reason: str


def to_jsonl(entries: Iterable[EntryInfo]) -> str:
    return "".join(json.dumps(e.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n" for e in entries)


def to_markdown(files: Iterable[MemoryFile]) -> str:
    parts = []
    for f in files:
        body = f.text if f.text.endswith("\n") or not f.text else f.text + "\n"
        parts.append(f"<!-- memoryd:file {f.rel} ({f.namespace}) -->\n{body}")
    return "\n".join(parts)


def parse_jsonl(data: str) -> list[ImportItem | BadLine]:
    """Each non-blank line of ``data`` as an :class:`ImportItem`, or a :class:`BadLine` saying why not."""
    out: list[ImportItem | BadLine] = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            out.append(BadLine(n, f"not JSON ({exc.msg})"))
            continue
        out.append(_item(n, obj))
    return out


def _item(n: int, obj: object) -> ImportItem | BadLine:
    if not isinstance(obj, dict):
        return BadLine(n, "not a JSON object")
    text = obj.get("text", obj.get("content"))
    if not isinstance(text, str) or not text.strip():
        return BadLine(n, "no 'text' (or 'content') string")
    kind, ns = obj.get("type"), obj.get("namespace")
    if kind is not None and not isinstance(kind, str):
        return BadLine(n, "'type' must be a string")
    if ns is not None and not isinstance(ns, str):
        return BadLine(n, "'namespace' must be a string")
    return ImportItem(n, text, kind, ns)
