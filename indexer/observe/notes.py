"""The capture: a conversation's turns, redacted, appended to a dated session note.

Where: ``<namespace folder>/<observe.folder>/YYYY-MM-DD-<session>.md`` under the first root
(``agents/claude-code/sessions/2026-12-02-4f1c….md``), dated by the session's first capture, so
one session is one note — until it holds half of ``observe.max_bytes`` or is older than
``observe.keep_days`` (:func:`rolls_over`): the session then goes on in a new part dated that day
(``…-4f1c.part2.md`` when the day is the same), and retention may delete the old one. The note
is an ordinary memory file: indexed, searchable, readable by the session that owns the namespace.
Format::

    # Conversation 2026-12-02 (session 4f1c…)

    **user** · 14:03 UTC
    the turn's text, line by line

    **assistant** · 14:03 UTC
    ...

Secrets are refused **line by line** by the write path's own filter
(:func:`memoryd.indexer.redaction.privacy.check`): a line it flags becomes ``[line withheld by
memoryd: <rule>]``; when the rest still fails as a whole (a secret split over lines), the turn is
withheld whole. Nothing a secret touched reaches the note, the index or the extraction prompt.

The writes themselves (append, retention, undo of an expiry) are :mod:`memoryd.indexer.write.session_notes`'s: this
module is text only, so the socket handler imports it without the write path's numerical stack.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import PurePosixPath

from memoryd.indexer.access import Namespace
from memoryd.indexer.redaction import privacy

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_PART = re.compile(r"\.part\d+$")
NOTE_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-[A-Za-z0-9._-]+\.md$")
WITHHELD_LINE = "[line withheld by memoryd: {rule}]"
WITHHELD_TURN = "[turn withheld by memoryd: {rule}]"


def note_name(session: str) -> str:
    """The session id as a file-name part: itself when short and plain, else a hash of it (so is an id
    that looks like a part's name, ``x.part2``: another session's note parts must not be its)."""
    if _SAFE_ID.fullmatch(session) and not _PART.search(session) and privacy.check(session).passed:
        return session
    return "s" + hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def note_rel(ns: Namespace, folder: str, started: str, session: str, part: int = 1) -> str:
    """The note of ``session`` started on ``started``; its ``part`` (2, 3 …) when a long session rolled over."""
    base = f"{folder}/{started}-{note_name(session)}{f'.part{part}' if part > 1 else ''}.md"
    return f"{ns.folder}/{base}" if ns.folder else base


def rolls_over(started: str, size: int, today: date, keep_days: int, max_bytes: int) -> bool:
    """Whether a session's next turns start a new part rather than grow its note (``started``: the note's
    day, ``size``: its bytes now).

    Retention never deletes the note being written, so without this one long-running session would
    outgrow both bounds: its note is done once it holds half of ``max_bytes`` (the namespace's cap,
    which the rest of its notes then share), or once it started longer ago than ``keep_days``. The old
    part is then an ordinary old note, which retention deletes whole when its turn comes."""
    if keep_days and started < (today - timedelta(days=keep_days)).isoformat():
        return True
    return bool(max_bytes) and size >= max_bytes // 2


def redact_turn(text: str) -> tuple[str, int]:
    """``text`` with every line the secret filter flags withheld; and how many were. A secret the
    lines hide only together (split over lines) withholds the whole turn (the count is then -1)."""
    out, withheld = [], 0
    for line in text.split("\n"):
        verdict = privacy.check(line)
        if verdict.passed:
            out.append(line)
        else:
            out.append(WITHHELD_LINE.format(rule=verdict.rule))
            withheld += 1
    kept = "\n".join(out)
    whole = privacy.check(kept)
    if not whole.passed:
        return WITHHELD_TURN.format(rule=whole.rule), -1
    return kept, withheld


def header(started: str, session: str) -> str:
    return f"# Conversation {started} (session {note_name(session)})\n"


def render(turns: Sequence[tuple[str, str]], now: datetime) -> str:
    """The Markdown appended for ``turns`` (role, redacted text); each turn a paragraph under its speaker."""
    stamp = now.astimezone(UTC).strftime("%H:%M UTC")
    parts = []
    for role, text in turns:
        body = "\n".join(_quoted(line) for line in text.split("\n"))
        parts.append(f"\n**{role}** · {stamp}\n{body}\n")
    return "".join(parts)


def _quoted(line: str) -> str:
    """A turn's line as note text: a line that would read as a heading, a list item the write path edits,
    or a fence opener is indented, so the note's structure stays the note's."""
    stripped = line.lstrip()
    if stripped.startswith(("#", "- ", "* ", "+ ", "```", "~~~", "<!--", "---")) or re.match(r"\d+[.)] ", stripped):
        return "    " + line
    return line


def now_utc() -> datetime:
    return datetime.now(UTC)


def folder_of(rel: str) -> str:
    return str(PurePosixPath(rel).parent)
