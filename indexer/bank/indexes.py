"""The index rule (docs/memory-bank.md) for ``details/`` sub-folders, as plan operations.

A sub-folder that has an ``index.md`` keeps it maintained (entries added for
new files, removed for deleted ones); a sub-folder without one gets one only
when it holds more than :data:`INDEX_THRESHOLD` Markdown files; otherwise a
glob is the fallback and nothing is written. Only direct sub-folders of
``details/`` and the files directly in them are considered.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from memoryd.indexer.bank.detect import read_text
from memoryd.indexer.bank.guards import refuse_secrets
from memoryd.indexer.bank.layout import DETAILS, INDEX, INDEX_THRESHOLD, Layout, stem_title, title_of
from memoryd.indexer.bank.model import Create, Op, Update
from memoryd.indexer.bank.routing import maintain_index, new_index


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def index_ops(bank: Path, layout: Layout, origin: dict[str, Path] | None = None) -> list[Op]:
    """Operations creating or maintaining sub-folder indexes; marks ``layout.indexed`` accordingly.

    ``layout`` is the shape after the plan's earlier operations; ``origin`` maps a details-relative
    path that a move will fill to the file's current location (to read its title or old index).
    """
    origin = origin or {}
    ops: list[Op] = []
    for folder in sorted(layout.folders):
        def where(name: str, folder: str = folder) -> Path:
            rel = f"{folder}/{name}"
            return origin.get(rel, bank / DETAILS / rel)
        titles = {n: title_of(where(n), stem_title(n)) for n in layout.folders[folder]}
        rel = f"{DETAILS}/{folder}/{INDEX}"
        current = where(INDEX)
        if current.is_file():
            old = read_text(current)
            new, changes = maintain_index(old, folder, titles)
            if changes:
                refuse_secrets(rel, old, new, source=f"file titles in {DETAILS}/{folder}/")
                ops.append(Update(rel, new, sha256_text(old), tuple(changes)))
            layout.indexed.add(folder)
        elif len(titles) > INDEX_THRESHOLD:
            text = new_index(folder, titles)
            refuse_secrets(rel, "", text, source=f"file titles in {DETAILS}/{folder}/")
            ops.append(Create(rel, text, f"{DETAILS}/{folder}/ holds {len(titles)} files (> {INDEX_THRESHOLD})"))
            layout.indexed.add(folder)
    return ops
