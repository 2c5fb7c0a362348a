"""What a query looks like to both legs: transcript speaker labels removed.

Agents often query with the conversation so far (``User: …`` / ``Assistant:
…`` per line). There the labels are layout, not content: each line repeats
them, the user's own name matches nearly every memory about them, and an
assistant's label matches none, so they only add noise to the query vector
and to the term statistics (MADial-zh dev, hybrid R@1 0.579 → 0.632; see
docs/quality.md). A query counts as a transcript only when at least two lines,
and at least half of its non-empty lines, start with a short label followed
by a colon (ASCII or full-width, Markdown ``- **Name**:`` included); anything
else — a one-line question that contains a colon, a note with one
``Todo:`` line — is searched exactly as written.
"""

from __future__ import annotations

import re

# A label: starts with a letter (so "10:30" is not one), up to 40 name-like characters, then a colon.
_LABEL = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?[^\W\d_][\w .'’-]{0,39}?(?:\*\*)?\s*[:：](?:\*\*)?\s*")
MIN_LABELLED_LINES = 2


def clean_query(query: str) -> str:
    """``query`` without its speaker labels if it is a transcript, else unchanged.

    Meant for the *raw* query, once: a transcript line that still starts with
    ``Note:`` after its label would lose that too on a second pass.
    """
    lines = query.split("\n")
    matches = [_LABEL.match(line) for line in lines]
    labelled = sum(1 for m in matches if m)
    non_empty = sum(1 for line in lines if line.strip())
    if labelled < MIN_LABELLED_LINES or 2 * labelled < non_empty:
        return query
    cleaned = [line[m.end():] if m else line for line, m in zip(lines, matches, strict=True)]
    out = "\n".join(cleaned)
    return out if out.strip() else query
