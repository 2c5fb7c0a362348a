"""File abstracts: a few sentences per memory file, made by the model at idle time, cached.

Why: a small context budget (a hook's 300 tokens) holds one or two excerpts; an abstract of a
file says what the whole file holds in a line, so the summary section of a block
(:mod:`memoryd.indexer.search.summaries`) can stand in for a file without a model call on the
request's path. The UI can show them next to a file.

Cached like embeddings (:func:`memoryd.indexer.cache.cache_key`): the key is sha256 of model id +
the file's text, so an edited file or another model misses and is abstracted again, and an
unchanged file is never sent twice. The store is its own SQLite file in the data dir
(``abstracts.sqlite``), LRU-bounded, rebuilt from nothing if lost: no correctness depends on it.

:func:`refresh_step` makes at most ``limit`` abstracts of the files that lack one and stops at
the first model failure (down, over budget: the next idle step tries again).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.errors import MemorydError
from memoryd.indexer.llm.port import JsonModel, model_id

log = structlog.get_logger("memoryd")

STORE_NAME = "abstracts.sqlite"
CAPACITY = 20_000
MAX_FILE_CHARS = 24_000  # of a file's text, for the model (its head: titles and first entries)
MAX_ABSTRACT_CHARS = 600
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["abstract"],
    "properties": {"abstract": {"type": "string", "minLength": 1, "maxLength": MAX_ABSTRACT_CHARS}},
}
PROMPT = ("Write a one to three sentence abstract of this memory file: what it records, with the key names, "
          "decisions and dates, in the file's language. No preamble. Answer JSON {\"abstract\": \"...\"}.")


def abstract_key(model: str, text: str) -> bytes:
    """sha256(model id + text), as the embedding cache keys a vector (:func:`memoryd.indexer.cache.cache_key`)."""
    return hashlib.sha256(f"{model}\x00{text}".encode()).digest()


class AbstractStore:
    """``key → abstract`` in one SQLite file; thread-safe (requests read, the idle job writes).

    After :meth:`close` a read misses and a write is dropped, rather than raising on a closed
    database: the idle job's model call can outlive shutdown (a slow model answers after the daemon
    stopped waiting for it), and what it brings back is then simply not kept."""

    def __init__(self, path: Path, capacity: int = CAPACITY) -> None:
        self.path = path
        self._capacity = capacity
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), check_same_thread=False, timeout=2.0)
        self._closed = False
        self._conn.execute("CREATE TABLE IF NOT EXISTS abstracts (key BLOB PRIMARY KEY, text TEXT NOT NULL, "
                           "used REAL NOT NULL)")
        self._conn.commit()

    def get(self, model: str, text: str) -> str | None:
        with self._lock:
            if self._closed:
                return None
            row = self._conn.execute("SELECT text FROM abstracts WHERE key = ?",
                                     (abstract_key(model, text),)).fetchone()
        return None if row is None else str(row[0])

    def put(self, model: str, text: str, abstract: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._conn.execute("INSERT OR REPLACE INTO abstracts (key, text, used) VALUES (?, ?, ?)",
                               (abstract_key(model, text), abstract, time.time()))
            (count,) = self._conn.execute("SELECT COUNT(*) FROM abstracts").fetchone()
            if count > self._capacity:  # least recently made first
                self._conn.execute("DELETE FROM abstracts WHERE key IN (SELECT key FROM abstracts ORDER BY used "
                                   "LIMIT ?)", (count - self._capacity,))
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            if self._closed:
                return 0
            return int(self._conn.execute("SELECT COUNT(*) FROM abstracts").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()


def make_abstract(model: JsonModel, text: str) -> str:
    """The model's abstract of ``text``, on one line. Raises what the model raises (``LLMError``)."""
    answer = model.complete_json([{"role": "system", "content": PROMPT},
                                  {"role": "user", "content": text[:MAX_FILE_CHARS]}], SCHEMA, name="file_abstract")
    return " ".join(str(answer["abstract"]).split())[:MAX_ABSTRACT_CHARS]


def refresh_step(files: Iterable[tuple[str, str]], store: AbstractStore, model: JsonModel, limit: int) -> int:
    """Abstract up to ``limit`` of ``files`` (``(name, text)``) that have none for this model; returns how
    many were made. Stops at the first model failure (logged): the next step tries again."""
    name, made = model_id(model), 0
    for rel, text in files:
        if made >= limit:
            break
        if not text.strip() or store.get(name, text) is not None:
            continue
        try:
            store.put(name, text, make_abstract(model, text))
        except (MemorydError, KeyError, TypeError, ValueError) as exc:
            log.info("abstracts.step_failed", path=rel, error=str(exc)[:200])
            break
        made += 1
    return made
