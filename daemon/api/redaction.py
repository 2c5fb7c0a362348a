"""What a confined session reads is redacted the way ``search`` redacts what it returns.

``search`` and ``context`` serve chunk text from the index, which was redacted when the
file was indexed (``indexer/ingestion/ingest.py``: :func:`memoryd.indexer.redaction.privacy.redact` at
``write.redact_index``). ``get``, ``list``, ``export`` and the MCP resources read the file
itself, so without this a direct or group session read by ``get`` the password that
``search`` had hidden from it. They now call the same function at the same level for
every session but the owner's, so a confined session sees one text whichever way it asks.
The owner reads the file as written (it is their file, and ``undo``/``history`` need the
exact bytes).

Redaction keeps every line (a secret spanning lines leaves its line breaks), so line
numbers, ranges and citations stay those of the file.
"""

from __future__ import annotations

import dataclasses

from memoryd.indexer.access import OWNER, Session
from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.entries import MemoryFile


def redacts(session: Session) -> bool:
    """Whether ``session``'s reads are redacted: every session but the owner's."""
    return session.kind != OWNER


def text_for(session: Session, text: str, level: str) -> str:
    """``text`` as ``session`` may read it (``level``: the index's ``write.redact_index``)."""
    return privacy.redact(text, level) if redacts(session) else text


def files_for(session: Session, files: list[MemoryFile], level: str) -> list[MemoryFile]:
    """``files`` with their text as ``session`` may read it (entries and exports are parsed from it)."""
    if not redacts(session):
        return files
    return [dataclasses.replace(f, text=privacy.redact(f.text, level)) for f in files]
