"""The formats of ``export`` and ``import``: JSONL entries and a Markdown bundle.

Export writes one JSON object per line: the fields ``list`` shows
(:class:`memoryd.indexer.write.entries.EntryInfo`) plus ``lines``, the entry's exact
lines in its file (list marker, entry marker, continuation lines), so an export
restores byte for byte. ``import`` reads two kinds of line:

* a line with a ``path`` (what export writes) is a *restore*: the entry goes back to
  that file and ``section`` (near ``start_line``), written as ``lines`` (or, without
  them, as ``- text`` with a marker for ``importance``/``reinforcements``), and an
  entry already there with the same text is left alone (:mod:`memoryd.indexer.write.restore`);
* any other line is a new memory: ``text`` (or ``content``), and ``type`` and
  ``namespace`` when present go through the router and dedup like ``remember``.

The Markdown bundle is for people and other tools: every file of the namespace,
whole, each after a ``<!-- memoryd:file PATH (NAMESPACE) -->`` line. It is not an
import format: a file's structure (USER blocks, sections) is not a list of memories.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.indexer.write.entries import EntryInfo, MemoryFile

JSONL, MARKDOWN = "jsonl", "markdown"
FORMATS = (JSONL, MARKDOWN)
_BREAK = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class ImportItem:
    """One line of an import: its 1-based line number and what it asks to remember (or restore).

    ``path`` set: a restore of the entry to that file (``section``, ``start_line`` and ``lines``
    say where and what, as export wrote them); None: a new memory for the router."""

    line: int
    text: str
    type: str | None
    namespace: str | None
    path: str | None = None
    section: str | None = None
    start_line: int | None = None
    lines: tuple[str, ...] | None = None
    importance: int | None = None
    reinforcements: int | None = None


@dataclass(frozen=True)
class BadLine:
    """A line that is not an entry: not JSON, not an object, or without a usable ``text``."""

    line: int
    reason: str


def to_jsonl(entries: Iterable[EntryInfo]) -> str:
    return "".join(json.dumps(e.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n" for e in entries)


def export_jsonl(files: Iterable[MemoryFile], entries: Iterable[EntryInfo]) -> tuple[int, str]:
    """``entries`` (of ``files``) as export's JSONL, each with its exact ``lines``; (count, text).

    Each file is split into lines once (the same breaks as :class:`~memoryd.indexer.markdown.mdlines.MdLines`)."""
    texts = {f.rel: f.text for f in files}
    split: dict[str, list[str]] = {}
    out, n = [], 0
    for e in entries:
        if e.path not in split:
            split[e.path] = _BREAK.split(texts.get(e.path, ""))
        row = {**e.to_dict(), "lines": split[e.path][e.start_line - 1:e.end_line]}
        out.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        n += 1
    return n, "".join(out)


def to_markdown(files: Iterable[MemoryFile]) -> str:
    parts = []
    for f in files:
        body = f.text if f.text.endswith("\n") or not f.text else f.text + "\n"
        parts.append(f"<!-- memoryd:file {f.rel} ({f.namespace}) -->\n{body}")
    return "\n".join(parts)


def parse_jsonl(data: str) -> list[ImportItem | BadLine]:
    """Each non-blank line of ``data`` as an :class:`ImportItem`, or a :class:`BadLine` saying why not.

    Lines end at ``\n`` alone: export writes text unescaped (``ensure_ascii=False``), and a U+2028 or
    a form feed inside an entry's text is not a line break of the JSONL (``str.splitlines`` says it is)."""
    out: list[ImportItem | BadLine] = []
    for n, raw in enumerate(data.split("\n"), 1):
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
    for key in ("type", "namespace", "path", "section"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return BadLine(n, f"{key!r} must be a string")
    for key in ("start_line", "importance", "reinforcements"):
        value = obj.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            return BadLine(n, f"{key!r} must be a whole number >= 0")
    lines = obj.get("lines")
    if lines is not None and (not isinstance(lines, list) or not lines
                              or not all(isinstance(x, str) for x in lines)):
        return BadLine(n, "'lines' must be a non-empty list of strings (the entry's lines, as export writes them)")
    return ImportItem(n, text, obj.get("type"), obj.get("namespace"), obj.get("path"), obj.get("section"),
                      obj.get("start_line") or None, tuple(lines) if lines is not None else None,
                      obj.get("importance"), obj.get("reinforcements"))
