"""Search hits, and the one way two of them become one.

Chunks overlap by design (80 tokens), so a passage that answers a query often
surfaces as two consecutive hits: the window that holds the question's words
and its neighbour that holds what follows them. Returning both repeats the
shared lines and splits one passage across two results. When hits that are
*consecutive in the ranking* come from the same file and overlap or touch,
they are returned as one hit spanning both (at most ``MAX_MERGED_CHUNKS``
chunks, so a hit stays a passage, not a file). Hits further apart in the
ranking are left alone: their order says the passage between them did not
rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memoryd.indexer.config import SearchMode
from memoryd.indexer.markdown.entrymeta import summarize

MAX_MERGED_CHUNKS = 3


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    root: str
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    vector_score: float
    text_score: float
    absorbed: tuple[int, ...] = ()  # ids of the chunks merged into this hit, in rank order
    match_lines: tuple[int, ...] = ()  # the lines that matched best, best first (search/matchlines.py)
    site: str | None = None  # PostgreSQL backend: the site whose file this is (None: the embedded index)

    def rescored(self, score: float) -> Hit:
        """This hit with another ``score`` (``dataclasses.replace`` costs ~10 µs a hit: a query rescores dozens)."""
        return Hit(self.chunk_id, self.root, self.path, self.start_line, self.end_line, self.heading, self.text, score,
                   self.vector_score, self.text_score, self.absorbed, self.match_lines, self.site)

    def with_match_lines(self, lines: tuple[int, ...]) -> Hit:
        """This hit naming ``lines`` as the ones that matched best."""
        return Hit(self.chunk_id, self.root, self.path, self.start_line, self.end_line, self.heading, self.text,
                   self.score, self.vector_score, self.text_score, self.absorbed, lines, self.site)

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy was a third of a keyword query's time.
        # chunk_id stays internal: ids change across re-indexing, paths and lines do not.
        out: dict[str, Any] = {"root": self.root, "path": self.path, "start_line": self.start_line,
                               "end_line": self.end_line, "heading": self.heading, "text": self.text,
                               "score": self.score, "vector_score": self.vector_score, "text_score": self.text_score,
                               "match_lines": list(self.match_lines)}
        if self.site is not None:
            out["site"] = self.site
        meta = summarize(self.text)  # entry markers in the passage: extra fields, only when present
        if meta is not None:
            if meta.importance is not None:
                out["importance"] = meta.importance
            out["reinforcements"] = meta.reinforced
        return out


@dataclass(frozen=True)
class SearchResult:
    """What one search returns: the hits, best first, and how they were found.

    :meth:`to_json` is the ``search`` method's result on the socket, field for
    field and in that order; the daemon sends it as is.
    """

    mode: SearchMode  # the mode that ran (keyword-only when there is no model)
    hits: list[Hit]
    took_ms: float
    abstained: bool = False  # min_score left no hit; ``reason`` says why
    reason: str | None = None
    keyword_plan: dict[str, Any] | None = None  # explain, with query words: how the keyword leg was bounded
    query_searched: str | None = None  # explain, when cleaning changed the query: what was searched
    explanations: list[dict[str, Any]] | None = field(default=None, repr=False)  # explain: one per hit
    query_analysis: dict[str, Any] | None = None  # explain: intent, synonyms added, fallback (search/intent.py...)
    degraded: str | None = None  # why a hybrid/vector search ran on the keyword leg only (embedding server down)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self.degraded is not None:
            out["degraded"] = self.degraded
        if self.abstained:
            out["abstained"] = True
            out["reason"] = self.reason
        if self.keyword_plan is not None:
            out["keyword_plan"] = self.keyword_plan
        if self.query_searched is not None:
            out["query_searched"] = self.query_searched
        if self.query_analysis is not None:
            out["query_analysis"] = self.query_analysis
        hits = [h.to_dict() for h in self.hits]
        if self.explanations is not None:
            for d, why in zip(hits, self.explanations, strict=True):
                d["explain"] = why
        out.update(hits=hits, took_ms=self.took_ms)
        return out


def merge_consecutive(hits: Sequence[Hit], max_chunks: int = MAX_MERGED_CHUNKS) -> list[Hit]:
    """Merge each run of consecutive hits of one file whose line spans overlap or touch.

    The merged hit keeps the first hit's rank, score, heading and chunk id;
    its span is the union, its text the union of the lines (each line once,
    as the first hit holding it has it), and its component scores the best
    of its parts. ``max_chunks`` < 2 returns the hits unchanged.
    """
    out: list[Hit] = []
    for h in hits:
        last = out[-1] if out else None
        if last is not None and _joins(last, h) and len(last.absorbed) + 1 < max_chunks:
            out[-1] = _absorb(last, h)
        else:
            out.append(h)
    return out


def _joins(a: Hit, b: Hit) -> bool:
    return (a.site, a.root, a.path) == (b.site, b.root, b.path) and b.start_line <= a.end_line + 1 \
        and b.end_line >= a.start_line - 1  # the same path on two sites is two files


def add_lines(lines: dict[int, str], start_line: int, text: str) -> None:
    """Record ``text``'s lines by line number; a line already recorded keeps its first version
    (several chunks may hold pieces of one long line)."""
    for offset, line in enumerate(text.split("\n")):
        lines.setdefault(start_line + offset, line)


def span_text(lines: dict[int, str], start_line: int, end_line: int) -> str:
    return "\n".join(lines.get(n, "") for n in range(start_line, end_line + 1))


def _absorb(a: Hit, b: Hit) -> Hit:
    lines: dict[int, str] = {}
    for h in (a, b):
        add_lines(lines, h.start_line, h.text)
    start, end = min(a.start_line, b.start_line), max(a.end_line, b.end_line)
    text = span_text(lines, start, end)
    return replace(a, start_line=start, end_line=end, text=text, vector_score=max(a.vector_score, b.vector_score),
                   text_score=max(a.text_score, b.text_score), absorbed=(*a.absorbed, b.chunk_id))
