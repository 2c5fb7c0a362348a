"""Existing entries a new memory might duplicate or update, with their cosine to it.

Two sources, both inside the plan's namespace of the first root:

* the entries of the target file itself (up to ``max_file_entries``, the last
  ones) — the router sends a fact and its update to the same file and section;
* the entries inside the chunks the index's vector search ranks nearest
  (``candidates`` chunks), and the few its keyword search ranks first — a similar fact
  may live in another file of the namespace, and the keyword leg finds the same entry
  while its vector is still pending;
* anywhere in the target file, the same entry word for word (:func:`memoryd.indexer.write.dedup.near_exact`),
  however old: a file of thousands of entries never gets a second copy.

Only the entries of the route's own place — the target file's section the
router chose (:func:`in_route`) — are *scoped* (:attr:`Candidate.scoped`): they
alone may be reinforced or replaced. Every other candidate is only reported
(``related`` in the answer) and never edited (:func:`memoryd.indexer.write.dedup.decide`):
a preference must not rewrite a journal line because the two read alike.

Entries are embedded one by one, exactly as the calibration embedded its pairs
(``passage:`` prefix, Markdown decoration stripped), and their vectors are kept
in the index's embedding cache, so an unchanged entry is embedded only once.
Runs on the index's writer thread (it writes the cache).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memoryd.indexer.access import namespace_of, resolve_target
from memoryd.indexer.config import SearchMode, WriteConfig
from memoryd.indexer.errors import BadTarget, ProviderUnavailable
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.markdown.mdedit import entries
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.memblocks import BlockError
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import StorageUnavailableError
from memoryd.indexer.storage.embedded.cache import cache_key
from memoryd.indexer.write.dedup import Candidate, near_exact
from memoryd.indexer.write.intake import Accepted

#: Chunks the keyword leg adds to the vector leg's (:func:`_nearest_chunks`): enough to find the entry itself.
KEYWORD_CANDIDATES = 3

if TYPE_CHECKING:
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.types import FloatArray


def read_text(path: Path) -> str | None:
    """A file's text decoded strictly (no newline translation); None if absent or not UTF-8."""
    try:
        return path.read_bytes().decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError):
        return None


def gather(index: MemoryIndex, root: Path, plan: Accepted, cfg: WriteConfig, *,
           memo: dict[bytes, FloatArray] | None = None) -> list[Candidate]:
    """Candidates for ``plan``, each scored against it (cosine of passage embeddings).

    ``memo`` is for a caller off the writer thread (a dry-run import): new vectors are kept there,
    for the next plans of the same call, instead of in the index's cache (which only the writer
    thread writes)."""
    found: dict[tuple[str, int], str] = {}
    texts: dict[str, str | None] = {}

    def file_entries(rel: str) -> list[tuple[int, str]]:
        if rel not in texts:
            texts[rel] = read_text(root / rel)
        text = texts[rel]
        return list(_entries_of(text)) if text else []

    own = file_entries(plan.target)
    for line, text in own[-cfg.max_file_entries :]:
        found[(plan.target, line)] = text
    for line, text in own[: -cfg.max_file_entries]:  # older entries: only the same entry counts (no embedding)
        if near_exact(text, plan.content):
            found[(plan.target, line)] = text
    for hit in _nearest_chunks(index, root, plan, cfg.candidates):
        for line, text in file_entries(hit[0]):
            if hit[1] <= line <= hit[2]:
                found[(hit[0], line)] = text
    if not found:
        return []
    target = texts.get(plan.target)
    scoped = in_route(target, plan.route.section) if target else frozenset()
    keys = list(found)
    vecs = embed_entries(index, [plan.content, *(found[k] for k in keys)], memo=memo)
    scores = vecs[1:] @ vecs[0]
    return [Candidate(p, ln, found[(p, ln)], float(s), scoped=p == plan.target and ln in scoped)
            for (p, ln), s in zip(keys, scores, strict=True)]


@functools.lru_cache(maxsize=16)
def _entries_of(text: str) -> tuple[tuple[int, str], ...]:
    """A file's entries, parsed once per distinct text (an import compares many lines with the same files);
    none for broken markers: not a candidate source (writing there is refused later)."""
    try:
        return tuple(entries(text))
    except BlockError:
        return ()


@functools.lru_cache(maxsize=16)
def in_route(text: str, section: str) -> frozenset[int]:
    """1-based lines of the entries of section ``section`` of ``text`` (where the router's append goes);
    in a file without that section, the entries above its first heading (a plain list of memories).
    A heading's section ends at the next heading of the same or a higher level."""
    try:
        doc = MdLines(text)
    except BlockError:
        return frozenset()
    found = doc.section(section)
    if found is not None:
        heading, end = found
        return frozenset(e.index + 1 for e in doc.entries if heading.index < e.index < end)
    first = min((h.index for h in doc.headings), default=len(doc.lines))
    return frozenset(e.index + 1 for e in doc.entries if e.index < first)


def _nearest_chunks(index: MemoryIndex, root: Path, plan: Accepted, k: int) -> list[tuple[str, int, int]]:
    """The chunks of the namespace nearest the new memory: by vector, and by keyword too, so the same
    entry is found while its vector is still pending (or the embedding model is away)."""
    prefix = f"{root}/{plan.namespace.folder}/" if plan.namespace.folder else f"{root}/"
    hits = []
    legs: tuple[tuple[SearchMode, int], ...] = (("vector", k), ("keyword", KEYWORD_CANDIDATES))
    for mode, n in legs:
        try:
            found = index.query(Query(plan.content, k=n, mode=mode, path_prefix=prefix, min_score=0.0))
        except (StorageUnavailableError, ProviderUnavailable):  # files are the truth: the target file only
            continue
        if found.degraded and mode == "vector":  # the embedder is down: keyword neighbours are no similarity
            continue                             # evidence for the vector leg (the keyword leg finds twins)
        hits += found.hits
    chunks = {(h.path, h.start_line, h.end_line) for h in hits
              if Path(h.root) == root and h.path.endswith(".md") and namespace_of(h.path) == plan.namespace
              and _writable(root, h.path)}
    return sorted(chunks)


def _writable(root: Path, rel: str) -> bool:
    """Could the writer edit ``rel``? A link (symlink or hard link) never is: as a candidate it would
    turn a plain append into a refused replace."""
    try:
        resolve_target(root, rel)
    except BadTarget:
        return False
    return True


def embed_entries(index: MemoryIndex, texts: Sequence[str], *,
                  memo: dict[bytes, FloatArray] | None = None) -> FloatArray:
    """Passage vectors for entry texts, through the index's embedding cache (rows in ``texts`` order);
    with ``memo``, new vectors go there instead of into the cache (see :func:`gather`). While the embedder
    is down, the rows only tell the same text from another (:func:`_same_text_only`): the write goes on."""
    embedder = index.embedder
    etexts = [clean_line(t) or t for t in texts]
    keys = [cache_key(embedder.model_id, t) for t in etexts]
    have = {k: memo[k] for k in keys if memo is not None and k in memo}
    with contextlib.suppress(StorageUnavailableError):  # a shared cache out of reach: the model gives them
        have |= index.cache.get_many([k for k in keys if k not in have], count=False)
    todo = {k: t for k, t in zip(keys, etexts, strict=True) if k not in have}
    if todo:
        try:
            mat = np.asarray(embedder.embed_passages(list(todo.values())), dtype=np.float32)
        except ProviderUnavailable:  # the embedder is down: the memory is written anyway, embedded later
            return _same_text_only(etexts)
        new = dict(zip(todo, mat, strict=True))
        have.update(new)
        if memo is not None:
            memo.update(new)
        elif not index.read_only:
            try:
                with index.lock, index.store.transaction() as t:
                    index.cache.put_many(t, new)
            except StorageUnavailableError:  # the shared cache out of reach: the vectors only go unsaved
                pass
    return np.stack([have[k] for k in keys])


def _same_text_only(texts: Sequence[str]) -> FloatArray:
    """Stand-in "vectors" while the embedder is down: one-hot by folded text, so a cosine is 1 for the
    same text after folding (case, width, punctuation, spaces) and 0 otherwise. Without real vectors
    nothing is replaced or reinforced on resemblance: only a restatement of the very text reinforces."""
    from memoryd.indexer.markdown.mdlines import fold

    groups: dict[str, int] = {}
    ids = [groups.setdefault(fold(t), len(groups)) for t in texts]
    return np.eye(len(groups), dtype=np.float32)[ids]
