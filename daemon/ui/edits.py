"""The edit-section form's text: what the person sees (no ``<!-- memoryd: … -->`` markers) and what is
written back (every marker of a line they left alone, kept).

A marker (:mod:`memoryd.indexer.markdown.entrymeta`) holds an entry's importance and reinforcements at the end
of its line. It is memoryd's bookkeeping, not the person's text: shown in the textarea it invites
being edited or deleted by hand, and ``update_section`` writes the body verbatim, so a form that
merely hid the markers would drop every entry's metadata on save. :func:`restore_markers` puts each
marker back on the line it came from, matched by the line's text against the section as it is in the
file *now* (so an edit made elsewhere meanwhile is not undone); a line the person changed is a new
entry and carries none.
"""

from __future__ import annotations

from collections import defaultdict

from memoryd.indexer.markdown.entrymeta import strip as strip_markers
from memoryd.indexer.markdown.memblocks import USER_START

__all__ = ["editable_body", "has_user_block", "restore_markers"]


def editable_body(body: str) -> str:
    """``body`` as the textarea shows it: each line without its marker."""
    return "\n".join(strip_markers(line) if "<!--" in line else line for line in body.split("\n"))


def has_user_block(body: str) -> bool:
    """A section holding a USER block is the person's own: ``update_section`` refuses it, so no form."""
    return USER_START in body


def restore_markers(submitted: str, current: str) -> str:
    """``submitted`` (the textarea) with each unchanged line's marker from ``current`` (the section now)."""
    marked: dict[str, list[str]] = defaultdict(list)
    for line in current.split("\n"):
        if "<!--" in line:
            bare = strip_markers(line)
            if bare != line:
                marked[bare].append(line)
    out = []
    for line in submitted.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        originals = marked.get(line)
        out.append(originals.pop(0) if originals else line)
    return "\n".join(out)
