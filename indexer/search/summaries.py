"""Context blocks with a model: what does not fit is summarized, not cut (issue #40, item 4).

Without a model, :func:`memoryd.indexer.search.context.build_context` fits a small budget by
excerpts and omissions: the evidence of a span too large for its share is cut to a few lines, and
the spans after it are left out. With a model (``[llm]``), :func:`compact_context` takes the spans
that fit *whole* in most of the budget (:data:`BODY_SHARE`) and hands the rest to the model, which
condenses them into short cited points under ``### Summary of N more memories``; the points go in
while the budget lasts (counted with the same tokenizer), each citing its span.

A file *abstract* (:mod:`memoryd.indexer.search.abstracts`, made at idle time and cached by
sha256 of model + text) stands in for a span of its file without any model call on the request's
path: the summary section then needs the model only for spans of files not yet abstracted.

Any failure — the model down, over its daily budget, an answer that does not fit the schema, a
point citing a span that is not there — gives the block :func:`build_context` makes: a model can
only make a block better, never absent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from memoryd.indexer.errors import MemorydError
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.search.context import (
    HEADER,
    ContextBlock,
    ContextSource,
    LineScorer,
    Span,
    build_context,
    merge_hits,
)
from memoryd.indexer.search.hits import Hit

log = structlog.get_logger("memoryd")

BODY_SHARE = 0.6  # whole spans may take this much of the budget; the summary has the rest
MAX_SUMMARIZED = 12  # spans handed to the model at most (the best of those that did not fit)
MAX_SPAN_CHARS = 4000  # of each span's text, for the model
SUMMARY_HEADER = "\n### Summary of {n} more memories\n"
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["points"],
    "properties": {"points": {"type": "array", "maxItems": 24, "items": {
        "type": "object", "additionalProperties": False, "required": ["source", "text"],
        "properties": {"source": {"type": "integer", "minimum": 1, "maximum": MAX_SUMMARIZED},
                       "text": {"type": "string", "minLength": 1, "maxLength": 400}}}}},
}
PROMPT = ("You condense retrieved memory passages for an assistant answering the question below. For each "
          "passage that helps answer it, write one or two short factual points keeping names, numbers and "
          "dates exactly; skip passages that do not help. Never invent anything. Answer JSON "
          '{"points": [{"source": <passage number>, "text": "<point>"}]}, most useful first.')

#: (root, path) of a span's file → its cached abstract, or None (not abstracted yet).
AbstractOf = Callable[[str, str], str | None]


def compact_context(
    query: str, hits: Sequence[Hit], max_tokens: int, count_tokens: Callable[[list[str]], list[int]],
    model: JsonModel | None, score_lines: LineScorer | None = None, abstract_of: AbstractOf | None = None,
) -> ContextBlock:
    """The context block, the spans that do not fit summarized by ``model`` (or by file abstracts).

    ``build_context``'s block whenever nothing needs summarizing, no summary can be had, or it would
    show less than that block does.
    """
    base = build_context(query, hits, max_tokens, count_tokens, score_lines)
    if (model is None and abstract_of is None) or not (base.omitted or any(s.lines for s in base.sources)):
        return base
    header = HEADER.format(query=" ".join(query.split())[:200])
    parts, used = [header], count_tokens([header])[0]
    if used >= max_tokens:
        return base
    body_budget = int(max_tokens * BODY_SHARE)
    whole: list[Span] = []
    rest: list[Span] = []
    for span in merge_hits(hits):
        item = f"\n### {span.cite()}\n\n{span.text()}\n"
        cost = count_tokens([item])[0] + 1
        if not rest and used + cost <= body_budget and span.text().strip():
            parts.append(item)
            used += cost
            whole.append(span)
        else:
            rest.append(span)
    points = _points(query, rest[:MAX_SUMMARIZED], model, abstract_of)
    if not points:
        return base
    lines: list[str] = []
    cited: list[Span] = []
    for index, text in points:
        span = rest[index]
        line = f"- {' '.join(text.split())} ({span.cite()})"
        shown = len(cited) + (span not in cited)
        trial = "\n".join([*parts, SUMMARY_HEADER.format(n=shown), *lines, line])
        if count_tokens([trial])[0] > max_tokens:
            continue
        lines.append(line)
        if span not in cited:
            cited.append(span)
    if not lines:
        return base
    text = "\n".join([*parts, SUMMARY_HEADER.format(n=len(cited)), *lines]) + "\n"
    tokens = count_tokens([text])[0]
    if tokens > max_tokens:  # a join merged tokens: the plain block rather than an over-budget one
        return base
    sources = [_source(s) for s in whole] + [replace(_source(s), summarized=True) for s in cited]
    return ContextBlock(text, tokens, tuple(sources), len(whole) + len(rest) - len(sources))


def _points(query: str, spans: Sequence[Span], model: JsonModel | None,
            abstract_of: AbstractOf | None) -> list[tuple[int, str]]:
    """(index into ``spans``, point) in the order to show them: file abstracts first (no model call),
    then the model's points for the spans not abstracted. [] when nothing could be had."""
    out: list[tuple[int, str]] = []
    asked: list[int] = []
    for i, span in enumerate(spans):
        abstract = abstract_of(span.root, span.path) if abstract_of is not None else None
        if abstract:
            out.append((i, abstract))
        else:
            asked.append(i)
    if model is None or not asked:
        return out
    passages = "\n\n".join(f"[{n}] {spans[i].cite()}\n{spans[i].text()[:MAX_SPAN_CHARS]}"
                           for n, i in enumerate(asked, 1))
    messages: list[Mapping[str, str]] = [{"role": "system", "content": PROMPT},
                                         {"role": "user", "content": f"Question: {query}\n\n{passages}"}]
    try:
        answer = model.complete_json(messages, SCHEMA, name="context_summary")
        for point in answer["points"]:
            n, text = point["source"], str(point["text"]).strip()
            if isinstance(n, int) and 1 <= n <= len(asked) and text:
                out.append((asked[n - 1], text))
    except (MemorydError, OSError, ValueError, KeyError, TypeError) as exc:  # any model failure: no summary
        log.info("context.summary_failed", error=str(exc)[:200], spans=len(asked))
    return out


def _source(span: Span) -> ContextSource:
    return ContextSource(span.root, span.path, span.start_line, span.end_line, span.score, None, span.site)
