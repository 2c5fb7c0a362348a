"""A ready-to-inject Markdown block of the best memories, within a token budget (the ``context`` method).

Hits of one file that overlap or touch (adjacent windows share their 80-token
overlap) are merged into one span, so the block never repeats a line. Spans
are taken in relevance order while they fit: the budget, counted with the
embedding model's own tokenizer, is never exceeded — a span that does not fit
is skipped (a smaller, less relevant one may still fit), and the block says
how many were left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryd.indexer.search.hits import add_lines, span_text

HEADER = "## Relevant memories\n\nRetrieved by memoryd for: {query}\n"


@dataclass
class Span:
    """Consecutive lines of one file, built from one or more hits."""

    root: str
    path: str
    start_line: int
    end_line: int
    score: float
    lines: dict[int, str] = field(default_factory=dict)

    def absorb(self, hit: dict[str, Any]) -> None:
        add_lines(self.lines, hit["start_line"], hit["text"])
        self.start_line = min(self.start_line, hit["start_line"])
        self.end_line = max(self.end_line, hit["end_line"])
        self.score = max(self.score, hit["score"])

    def text(self) -> str:
        return span_text(self.lines, self.start_line, self.end_line)

    def cite(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


def merge_hits(hits: Sequence[dict[str, Any]]) -> list[Span]:
    """Group hits per file and merge those that overlap or are adjacent; best span first.

    A sweep over each file's hits sorted by start line, so the result does not
    depend on hit order (a hit bridging two others joins all three). When
    several hits hold pieces of one long line, the line keeps the first piece.
    """
    by_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for h in hits:
        by_file.setdefault((h["root"], h["path"]), []).append(h)
    spans: list[Span] = []
    for (root, path), group in by_file.items():
        current: Span | None = None
        for h in sorted(group, key=lambda h: (h["start_line"], h["end_line"])):
            if current is None or h["start_line"] > current.end_line + 1:
                current = Span(root, path, h["start_line"], h["end_line"], h["score"])
                spans.append(current)
            current.absorb(h)
    return sorted(spans, key=lambda s: -s.score)


def build_context(
    query: str, hits: Sequence[dict[str, Any]], max_tokens: int, count_tokens: Callable[[list[str]], list[int]],
) -> dict[str, Any]:
    """Fit the best spans into ``max_tokens``; returns the block, its size and its sources.

    The returned ``tokens`` is the model-token count of the whole block
    (header included) and is always ≤ ``max_tokens``; with a budget too small
    for even the header, the block is empty.
    """
    header = HEADER.format(query=" ".join(query.split())[:200])
    parts: list[str] = [header]
    used = count_tokens(["\n".join(parts)])[0]
    spans = merge_hits(hits)
    if used > max_tokens:
        return {"text": "", "tokens": 0, "sources": [], "omitted": len(spans)}
    sources: list[dict[str, Any]] = []
    omitted = 0
    for span in spans:
        item = f"\n### {span.cite()}\n\n{span.text()}\n"
        size = count_tokens(["\n".join([*parts, item])])[0]
        if size > max_tokens:
            omitted += 1
            continue
        parts.append(item)
        used = size
        sources.append({"root": span.root, "path": span.path, "start_line": span.start_line,
                        "end_line": span.end_line, "score": round(span.score, 6)})
    text = "\n".join(parts) if sources else ""
    return {"text": text, "tokens": used if sources else 0, "sources": sources, "omitted": omitted}
