"""From files on disk to rows ready to commit: read → chunk → key → embed.

Work is done in batches of files so that embedding runs in full, length-sorted
batches even when every file holds one chunk; only texts missing from the
cache reach the model. Nothing here writes: :mod:`memoryd.indexer.engine` commits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memoryd.indexer import keyword
from memoryd.indexer.cache import EmbeddingCache, cache_key
from memoryd.indexer.chunker import chunk_markdown
from memoryd.indexer.config import ChunkingConfig
from memoryd.indexer.embedtext import embedding_text, keyword_text
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.files import FileContent
from memoryd.indexer.store import NewChunk
from memoryd.indexer.types import Embedder
from memoryd.indexer.write.privacy import redact

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
    """Chunk one file's content and compute each chunk's cache key and keyword terms."""
    doc = chunk_markdown(content.text, embedder.count_tokens, chunking.max_tokens, chunking.overlap_tokens)
    chunks = []
    embed_texts: dict[bytes, str] = {}
    for ch in doc.chunks:
        heading, text = redact(ch.heading, redact_level), redact(ch.text, redact_level)
        etext = embedding_text(heading, text)
        key = cache_key(embedder.model_id, etext)
        embed_texts[key] = etext
        chunks.append(NewChunk(
            start_line=ch.start_line, end_line=ch.end_line, heading=heading, text=text,
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            embed_key=key,
            terms=keyword.document_terms(keyword_text(heading, text)),
        ))
    return PreparedFile(root, rel, content, redact(doc.front_matter, redact_level), chunks, embed_texts,
                        [*content.warnings, *doc.warnings])


def embed_missing(
    files: Sequence[PreparedFile], embedder: Embedder, cache: EmbeddingCache,
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
