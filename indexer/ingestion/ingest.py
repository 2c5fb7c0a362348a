"""From files on disk to rows ready to commit: read → chunk → key → embed.

Work is done in batches of files so that embedding runs in full, length-sorted
batches even when every file holds one chunk; only texts missing from the
cache reach the model. Nothing here writes: :mod:`memoryd.indexer.engine` commits.

One file must never stop the others: whatever a stage of :func:`prepare_file`
raises because of the text it was given (a detector that decodes strictly, a
parser that recurses too deep) becomes :class:`FileSkipped` with reason
``prepare-failed``, naming the stage and the exception, so the file is listed in
``status`` and its batch goes on. What is not the file's doing still propagates
(:func:`file_fault`): memory exhaustion, OS errors, memoryd's own typed errors
(a config or model error, storage). A stage that fails is never bypassed: a file
whose secret filter raised is not indexed unredacted, it is not indexed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memoryd.indexer.config import ChunkingConfig
from memoryd.indexer.errors import FileSkipped, MemorydError
from memoryd.indexer.ingestion.chunker import chunk_markdown
from memoryd.indexer.ingestion.embedtext import embedding_text, keyword_text
from memoryd.indexer.ingestion.files import FileContent
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search import keyword
from memoryd.indexer.storage.base import CacheStore
from memoryd.indexer.storage.embedded.cache import cache_key
from memoryd.indexer.storage.embedded.store import NewChunk
from memoryd.indexer.types import Embedder

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray


@dataclass
class PreparedFile:
    """A file read and chunked, with the vectors its new chunks need."""

    root: Path
    rel: str
    content: FileContent
    front_matter: str
    chunks: list[NewChunk]
    embed_texts: dict[bytes, str] = field(default_factory=dict)  # cache key → text the model sees
    warnings: list[str] = field(default_factory=list)


@dataclass
class EmbedResult:
    vectors: dict[bytes, FloatArray]
    embedded: int
    cache_hits: int


def prepare_file(
    root: Path, rel: str, content: FileContent, embedder: Embedder, chunking: ChunkingConfig,
    redact_level: str = "secrets",
) -> PreparedFile:
    """Chunk one file's content and compute each chunk's cache key and keyword terms.

    Raises :class:`FileSkipped` (``prepare-failed``) when a stage fails on this file's text."""
    with stage(rel, "chunker"):
        doc = chunk_markdown(content.text, embedder.count_tokens, chunking.max_tokens, chunking.overlap_tokens)
    with stage(rel, "secret filter"):
        redacted = [(privacy.redact(ch.heading, redact_level), privacy.redact(ch.text, redact_level))
                    for ch in doc.chunks]
        front_matter = privacy.redact(doc.front_matter, redact_level)
    chunks = []
    embed_texts: dict[bytes, str] = {}
    with stage(rel, "keys and terms"):
        for ch, (heading, text) in zip(doc.chunks, redacted, strict=True):
            etext = embedding_text(heading, text)
            key = cache_key(embedder.model_id, etext)
            embed_texts[key] = etext
            chunks.append(NewChunk(
                start_line=ch.start_line, end_line=ch.end_line, heading=heading, text=text,
                sha256=hashlib.sha256(text.encode()).hexdigest(),
                embed_key=key,
                terms=keyword.document_terms(keyword_text(heading, text)),
            ))
    return PreparedFile(root, rel, content, front_matter, chunks, embed_texts, [*content.warnings, *doc.warnings])


PREPARE_FAILED = "prepare-failed"
_DETAIL_CHARS = 200


def file_fault(exc: BaseException) -> bool:
    """Whether ``exc``, raised while preparing one file, is that file's doing (skip the file) rather
    than the machine's or memoryd's (propagate: it would fail every other file too).

    Not the file's: anything that is not an :class:`Exception` (KeyboardInterrupt, SystemExit),
    MemoryError, OSError (a disk, a descriptor limit: reading turns the file's own OS errors into
    FileSkipped first) and memoryd's typed errors (ConfigError, ModelError, StoreError ...).
    FileSkipped itself is already the file's verdict."""
    if isinstance(exc, FileSkipped):
        return True
    return isinstance(exc, Exception) and not isinstance(exc, MemoryError | OSError | MemorydError)


@contextmanager
def stage(rel: str, name: str) -> Iterator[None]:
    """Run one per-file stage: an exception that is the file's fault becomes ``FileSkipped``
    (``prepare-failed: <stage>: <Type>: <message>``); everything else passes through unchanged."""
    try:
        yield
    except FileSkipped:
        raise
    except Exception as exc:
        if not file_fault(exc):
            raise
        raise FileSkipped(rel, PREPARE_FAILED, f"{name}: {describe_error(exc)}") from exc


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, cut short and with secrets redacted: it is shown by ``status``
    and logged, and an exception's message may quote the text that made it."""
    words = " ".join(str(exc)[: 4 * _DETAIL_CHARS].split())
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in words)[:_DETAIL_CHARS]
    try:
        message = privacy.redact(message, "all")
    except Exception:  # the filter may be what failed: say only what was raised
        message = "(message withheld: the secret filter could not check it)"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def embed_missing(
    files: Sequence[PreparedFile], embedder: Embedder, cache: CacheStore,
    persist: Callable[[dict[bytes, FloatArray]], None] | None = None, slice_size: int = 32,
) -> EmbedResult:
    """Vectors for every chunk key of ``files``: from the cache, else from the model.

    Missing texts are embedded in slices of ``slice_size`` (sorted by length first, so
    slices stay evenly padded), and each slice is handed to ``persist`` as soon as it
    exists: a crash then loses at most one slice of model work, not a whole group.
    """
    keys = list(dict.fromkeys(c.embed_key for f in files for c in f.chunks))
    found = cache.get_many(keys)
    todo = {key: text for f in files for key, text in f.embed_texts.items() if key not in found}
    vectors = dict(found)
    order = sorted(todo, key=lambda key: len(todo[key]))
    for start in range(0, len(order), slice_size):
        part = order[start : start + slice_size]
        mat = np.asarray(embedder.embed_passages([todo[key] for key in part]), dtype=np.float32)
        fresh = dict(zip(part, mat, strict=True))
        if persist is not None:
            persist(fresh)
        vectors.update(fresh)
    return EmbedResult(vectors, embedded=len(todo), cache_hits=len(keys) - len(todo))


def skip_reason(exc: FileSkipped) -> str:
    return exc.reason + (f": {exc.detail}" if exc.detail else "")
