"""A ready-to-inject Markdown block of the best memories, within a token budget (the ``context`` method).

Hits of one file that overlap or touch (adjacent windows share their 80-token
overlap) are merged into one span, so the block never repeats a line. Spans
are taken in relevance order; the budget, counted with the embedding model's
own tokenizer, is never exceeded. Each span has a *share* of what is left
(split between the spans still to come, at most ``SPANS_WANTED`` of them): a
span that fits its share goes in whole; a larger one goes in as an *excerpt*
— the lines that matched (the hits' ``match_lines``), then their nearest
neighbours while the share lasts — with ``…`` marking the lines left out, so a
small budget still carries the evidence of several passages instead of one
passage or none. A span whose best line alone does not fit is left out; the
block counts those (``omitted``) and each excerpt names the lines it shows.

The matched lines are lexical: when the evidence shares no word with the
question ("When did she paint a sunrise?" / "I painted that lake sunrise last
year") they point elsewhere. Given a ``score_lines`` callable (the query
model's cosine of each line with the query), an excerpt instead takes its
lines most similar to the question first. Only spans that must be trimmed are
scored, and at most ``scored_tokens`` tokens of lines per block (the lines nearest
the matched ones first; the rest keep the matched-lines order), so the model's
extra work on a block never seen before is bounded by tokens, not time
(docs/quality.md, "Excerpt lines ranked by the model").

Nothing a reader would not see is paid for: an entry's trailing ``<!-- memoryd: … -->``
marker and a line that is only an HTML comment (a Memory Bank block marker, a generated-section
marker) are hidden by every Markdown renderer, so the block leaves them out (the line keeps its
number, empty). A heading alone says where a fact is, not the fact: an excerpt starts with a
line that is not a heading, and a span that has nothing but headings and blank lines is left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memoryd.indexer.markdown.entrymeta import strip as strip_markers
from memoryd.indexer.search.hits import Hit, add_lines, span_text

HEADER = "## Relevant memories\n\nRetrieved by memoryd for: {query}\n"
GAP = "…"
SPANS_WANTED = 2
"""Each span may take 1/SPANS_WANTED of what is left: halves (the first span 1/2, the next 1/4, ...)
held the evidence most often on the dev sets (docs/quality.md, "Context blocks": 2 > 3 > 4)."""
EXCERPT_BATCH = 4  # an excerpt's lines are counted this many at a time, as they are taken
MAX_SCORED_TOKENS = 1024
"""Tokens of lines per block given to ``score_lines`` (the default of ``build_context``): lines are taken
nearest the matched ones first while the allowance lasts; those beyond it keep the matched-lines order. The
cost of a block whose lines were never embedded is then a few query embeddings (docs/quality.md)."""

_COMMENT_LINE = re.compile(r"^[ \t]*<!--.*?-->[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]|$)")


def shown_text(text: str) -> str:
    """``text`` as the block shows it: entry markers removed, comment-only lines emptied (same line count)."""
    text = strip_markers(text)
    return _COMMENT_LINE.sub("", text) if "<!--" in text else text


def is_heading(line: str) -> bool:
    return bool(_HEADING.match(line))


LineScorer = Callable[[list[str]], list[float]]
"""Similarity of each line to the query (higher: closer), one value per line, in one call."""


@dataclass
class Span:
    """Consecutive lines of one file, built from one or more hits."""

    root: str
    path: str
    start_line: int
    end_line: int
    score: float
    lines: dict[int, str] = field(default_factory=dict)
    matched: list[tuple[float, int]] = field(default_factory=list)  # (-hit score, line): the hits' match_lines
    site: str | None = None  # a shared database's site whose file this is (None: the embedded index)

    def absorb(self, hit: Hit) -> None:
        add_lines(self.lines, hit.start_line, shown_text(hit.text))
        self.matched += [(-hit.score, n) for n in hit.match_lines]
        self.start_line = min(self.start_line, hit.start_line)
        self.end_line = max(self.end_line, hit.end_line)
        self.score = max(self.score, hit.score)

    def matched_lines(self) -> list[int]:
        """The hits' matched lines, the best hit's first (each hit names its own best first)."""
        return list(dict.fromkeys(n for _, n in sorted(self.matched, key=lambda m: m[0])))

    def text(self) -> str:
        return span_text(self.lines, self.start_line, self.end_line)

    def cite(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


def cosine_scorer(embed_passages: Callable[[list[str]], Any], query_vector: Any) -> LineScorer:
    """A :data:`LineScorer` from the model: each line embedded as a passage (as chunks are, so in the
    space the query vector searched), scored by its cosine with ``query_vector`` (vectors are unit length)."""

    def score(lines: list[str]) -> list[float]:
        return [float(x) for x in embed_passages(lines) @ query_vector]

    return score


@dataclass(frozen=True)
class ContextSource:
    """One span the block shows: where it is, its best hit's score, and (an excerpt) the lines it shows."""

    root: str
    path: str
    start_line: int
    end_line: int
    score: float
    lines: tuple[int, ...] | None = None  # None: shown whole
    site: str | None = None  # as a search hit's: only on a backend with sites
    summarized: bool = False  # shown as points of the summary section (memoryd.indexer.search.summaries)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"root": self.root, "path": self.path, "start_line": self.start_line,
                               "end_line": self.end_line, "score": round(self.score, 6)}
        if self.lines is not None:
            out["lines"] = list(self.lines)
        if self.summarized:
            out["summarized"] = True
        if self.site is not None:
            out["site"] = self.site
        return out


@dataclass(frozen=True)
class ContextBlock:
    """What :func:`build_context` made: the Markdown ``text``, its size in model ``tokens``, its
    ``sources`` in block order and how many spans were ``omitted``. ``abstained``/``reason``: the
    search found nothing confident (set by whoever searched, :meth:`abstaining`).

    :meth:`to_json` is the ``context`` method's block on the socket, field for field and in that order.
    """

    text: str
    tokens: int
    sources: tuple[ContextSource, ...]
    omitted: int
    abstained: bool = False
    reason: str | None = None

    def abstaining(self, reason: str | None) -> ContextBlock:
        return replace(self, abstained=True, reason=reason)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "tokens": self.tokens,
                               "sources": [s.to_json() for s in self.sources], "omitted": self.omitted}
        if self.abstained:
            out.update(abstained=True, reason=self.reason)
        return out


def merge_hits(hits: Sequence[Hit]) -> list[Span]:
    """Group hits per file and merge those that overlap or are adjacent; best span first.

    A sweep over each file's hits sorted by start line, so the result does not
    depend on hit order (a hit bridging two others joins all three). When
    several hits hold pieces of one long line, the line keeps the first piece.
    The same root and path on two sites of a shared database are two files.
    """
    by_file: dict[tuple[str | None, str, str], list[Hit]] = {}
    for h in hits:
        by_file.setdefault((h.site, h.root, h.path), []).append(h)
    spans: list[Span] = []
    for (site, root, path), group in by_file.items():
        current: Span | None = None
        for h in sorted(group, key=lambda h: (h.start_line, h.end_line)):
            if current is None or h.start_line > current.end_line + 1:
                current = Span(root, path, h.start_line, h.end_line, h.score, site=site)
                spans.append(current)
            current.absorb(h)
    return sorted(spans, key=lambda s: -s.score)


def build_context(
    query: str, hits: Sequence[Hit], max_tokens: int, count_tokens: Callable[[list[str]], list[int]],
    score_lines: LineScorer | None = None, scored_tokens: int = MAX_SCORED_TOKENS,
) -> ContextBlock:
    """Fit the best spans into ``max_tokens``, whole or as excerpts; returns the block, its size and its sources.

    The returned ``tokens`` is the model-token count of the whole block
    (header included) and is always ≤ ``max_tokens``; with a budget too small
    for even the header, the block is empty. A source shown as an excerpt
    carries ``lines``, the line numbers it shows. ``score_lines`` (optional) orders excerpt lines by
    similarity to the query instead of by the hits' matched lines, for at most ``scored_tokens``
    tokens of lines in the whole block.
    """
    if scored_tokens < 0:
        raise ValueError(f"scored_tokens must be >= 0, got {scored_tokens}")
    header = HEADER.format(query=" ".join(query.split())[:200])
    parts: list[str] = [header]
    used = count_tokens(["\n".join(parts)])[0]
    spans = merge_hits(hits)
    if used > max_tokens:
        return ContextBlock("", 0, (), len(spans))
    sources: list[ContextSource] = []
    omitted = 0
    ranker = _LineRanker(score_lines, count_tokens, scored_tokens)
    for n, span in enumerate(spans):
        share = (max_tokens - used) // max(1, min(SPANS_WANTED, len(spans) - n))
        item, shown, size = _fitted(span, share, max_tokens - used - 1, count_tokens, ranker)
        if not item:
            omitted += 1
            continue
        parts.append(item)
        used += size + 1  # the joining newline
        sources.append(ContextSource(span.root, span.path, span.start_line, span.end_line, span.score,
                                     None if shown is None else tuple(shown), span.site))
    # Sizes were summed per item (one tokenisation of each line, not of the growing block); the
    # block is counted once, and should tokens merge across a join, the last items give way.
    used = count_tokens(["\n".join(parts)])[0]
    while sources and used > max_tokens:
        parts.pop()
        sources.pop()
        omitted += 1
        used = count_tokens(["\n".join(parts)])[0]
    text = "\n".join(parts) if sources else ""
    return ContextBlock(text, used if sources else 0, tuple(sources), omitted)


def _item(span: Span, body: str, excerpt: bool) -> str:
    return f"\n### {span.cite()}{' (excerpt)' if excerpt else ''}\n\n{body}\n"


@dataclass
class _LineRanker:
    """Orders an excerpt's candidate lines: the matched-lines order (:func:`_excerpt_order`), its head —
    as many lines as the block's token allowance ``left`` still covers — re-ordered by ``score_lines``."""

    score_lines: LineScorer | None
    count_tokens: Callable[[list[str]], list[int]]
    left: int

    def order(self, span: Span, numbers: list[int]) -> list[int]:
        lexical = _excerpt_order(span, numbers)
        if self.score_lines is None or not numbers or self.left <= 0:
            return lexical
        taken = spent = 0
        for cost in self.count_tokens([span.lines[n] for n in lexical]):
            if spent + cost > self.left:
                break
            spent += cost
            taken += 1
        head = lexical[:taken]
        if len(head) < 2:  # one line has no order to change: the allowance is kept for the next span
            return lexical
        self.left -= spent
        scores = self.score_lines([span.lines[n] for n in head])
        if len(scores) != len(head):
            raise ValueError(f"score_lines returned {len(scores)} scores for {len(head)} lines")
        rank = {n: i for i, n in enumerate(head)}  # ties: as without scores
        by_line = dict(zip(head, scores, strict=True))
        return sorted(head, key=lambda n: (-by_line[n], rank[n])) + lexical[taken:]


def _fitted(
    span: Span, share: int, left: int, count_tokens: Callable[[list[str]], list[int]], ranker: _LineRanker,
) -> tuple[str, list[int] | None, int]:
    """The span's block item — whole if it fits ``share``, else an excerpt within ``share`` (its best
    line always, if that fits in ``left``) —, the lines an excerpt shows (None: whole) and the item's
    size in tokens. ``("", None, 0)`` when not even its best line fits."""
    numbers = [n for n in range(span.start_line, span.end_line + 1) if span.lines.get(n, "").strip()]
    if not any(not is_heading(span.lines[n]) for n in numbers):  # only headings: no fact to show
        return "", None, 0
    frame = count_tokens([_item(span, GAP, excerpt=True)])[0]
    if frame >= left:
        return "", None, 0
    text = _item(span, span.text(), excerpt=False)
    whole = count_tokens([text])[0]
    if whole <= share:
        return text, None, whole
    order = _fact_first(span, ranker.order(span, numbers))
    chosen: list[int] = []
    total = frame
    for at in range(0, len(order), EXCERPT_BATCH):  # lines are counted as they are taken, a few at a time
        batch = order[at:at + EXCERPT_BATCH]
        for n, cost in zip(batch, count_tokens([span.lines[n] for n in batch]), strict=True):
            extra = cost + 2  # the line, its newline and a possible gap marker
            if total + extra > max(min(share, left), frame + extra if not chosen else 0):
                break
            chosen.append(n)
            total += extra
        else:
            continue
        break
    if not chosen or total > left or all(is_heading(span.lines[n]) for n in chosen):
        return "", None, 0
    chosen.sort()
    return _item(span, _excerpt_body(span, chosen), excerpt=True), chosen, total


def _fact_first(span: Span, order: list[int]) -> list[int]:
    """``order`` with its first non-heading line moved to the front: the line an excerpt always keeps
    is a fact, not the heading above it (a matched heading still comes next)."""
    first = next((i for i, n in enumerate(order) if not is_heading(span.lines[n])), 0)
    return [order[first], *order[:first], *order[first + 1:]] if first else order


def _excerpt_order(span: Span, numbers: list[int]) -> list[int]:
    """Lines in the order an excerpt takes them: the matched lines, then outwards from them, nearest first."""
    present = set(numbers)
    seeds = [n for n in span.matched_lines() if n in present] or numbers[:1]
    order = list(dict.fromkeys(seeds))
    # Nearest first; at equal distance the line after (in a chat, the answer follows the question).
    rest = sorted(present - set(order), key=lambda n: (min(abs(n - s) for s in seeds), -n))
    return order + rest


def _excerpt_body(span: Span, chosen: list[int]) -> str:
    """The chosen lines in order, each run of lines left out shown as one ``…`` line."""
    out: list[str] = []
    prev = span.start_line - 1
    for n in chosen:
        if n > prev + 1 and any(span.lines.get(m, "").strip() for m in range(prev + 1, n)):
            out.append(GAP)
        out.append(span.lines[n])
        prev = n
    if any(span.lines.get(m, "").strip() for m in range(prev + 1, span.end_line + 1)):
        out.append(GAP)
    return "\n".join(out)
