"""File paths and namespace names in replies go through the secret filter too.

Why: the filter ran on what an entry says, never on where it lives. A namespace named
``peer:ghp_…`` (its folder ``peers/ghp_…/``) or a file named for an AWS key was stored,
and every hit, ``list`` entry and ``export`` line then returned the secret whole. New
ones are refused at write time (:func:`memoryd.indexer.write.intake.prepare`); this module
covers the ones already on disk: a path or namespace that holds a secret is shown with
the secret replaced by ``[REDACTED:rule]``, for every session, as index-time redaction
hides a secret in the text of a hit. Such a path cannot be used to ``get`` the file: rename
it (the log says which root-relative path is affected only by its redacted form too).

The filter costs tens of microseconds a string; replies repeat the same few paths, so the
answers are memoised (bounded).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.entries import EntryInfo, MemoryFile

LEVEL = "secrets"  # keys, tokens, passwords: not the network kind (an IP in a folder name is no secret)


@lru_cache(maxsize=8192)
def shown(name: str) -> str:
    """``name`` (a root-relative path, a namespace) with any secret in it replaced by ``[REDACTED:rule]``."""
    return privacy.redact(name, LEVEL)


def hits(out: dict[str, Any], key: str = "hits") -> dict[str, Any]:
    """A search or context reply with the ``path`` of each of its ``key`` items shown redacted."""
    for item in out.get(key, ()):
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            item["path"] = shown(item["path"])
    return out


def context(out: dict[str, Any]) -> dict[str, Any]:
    """A context reply: its sources and the citations inside its Markdown block."""
    paths = {s["path"] for s in out.get("sources", ()) if isinstance(s, dict) and isinstance(s.get("path"), str)}
    text = out.get("text")
    if isinstance(text, str):
        for path in sorted(paths, key=len, reverse=True):
            if shown(path) != path:
                text = text.replace(path, shown(path))
        out["text"] = text
    return hits(out, "sources")


def entries(found: list[EntryInfo]) -> list[EntryInfo]:
    """``list``/``export`` entries with their path and namespace shown redacted."""
    return [e if shown(e.path) == e.path and shown(e.namespace) == e.namespace
            else dataclasses.replace(e, path=shown(e.path), namespace=shown(e.namespace)) for e in found]


def files(found: list[MemoryFile]) -> list[MemoryFile]:
    """Files for the Markdown export with their root-relative path shown redacted."""
    return [f if shown(f.rel) == f.rel and shown(f.namespace.id) == f.namespace.id
            else dataclasses.replace(f, rel=shown(f.rel), namespace=dataclasses.replace(
                f.namespace, id=shown(f.namespace.id))) for f in found]


def per_namespace(rows: dict[str, Any]) -> dict[str, Any]:
    """``stats``' table keyed by namespace, the names shown redacted."""
    return {shown(name): row for name, row in rows.items()}
