"""What text is embedded for a chunk, and what text feeds its keyword terms.

The text a hit returns is always the source as written; what the model sees is
a cleaned form. Markdown decoration (``- **Name**:``, ``#``, backticks, link
targets) carries no meaning for the model and measurably hurts dense
retrieval, so it is stripped, and so are memoryd's entry markers
(:mod:`memoryd.indexer.markdown.entrymeta`): a reinforcement must not move a memory in
the vector space or the keyword index. Text without markers is cleaned exactly
as before, so adding the marker rule re-embeds nothing. The keyword leg also gets the heading path (it
usually holds the date and topic of the section), which the chunk's own lines
may not repeat; the model does not (it measured worse on Chinese).

``EMBED_TEXT_VERSION`` is part of the index identity: changing these rules
re-embeds everything once, cleanly.
"""

from __future__ import annotations

import re

from memoryd.indexer.markdown.entrymeta import strip

EMBED_TEXT_VERSION = "1"

_LIST_MARKER = re.compile(r"^\s{0,8}(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`+|~~)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_SPACES = re.compile(r"[ \t]+")


def clean_line(line: str) -> str:
    line = strip(line)
    line = _HEADING.sub("", line)
    line = _QUOTE.sub("", line)
    line = _LIST_MARKER.sub("", line)
    line = _LINK.sub(r"\1", line)
    line = _EMPHASIS.sub("", line)
    return _SPACES.sub(" ", line).strip()


def embedding_text(heading: str, text: str) -> str:
    """What the embedding model sees for a chunk: its cleaned lines (never empty).

    ``heading`` is accepted but not used: putting the heading path (dates,
    section names) in front measured +0.01 R@1 on English and −0.03 on
    Chinese (docs/quality.md), so the keyword leg alone carries it.
    """
    lines = (clean_line(x) for x in text.split("\n"))
    return "\n".join(x for x in lines if x) or text


def keyword_text(heading: str, text: str) -> str:
    """The text whose terms go into the keyword index: heading path, then the chunk."""
    text = strip(text)
    return f"{heading}\n{text}" if heading else text
