"""What an edit changed in a file, kept so that an undo can put the exact bytes back.

A :class:`Patch` is the line diff between a file before and after one edit:
hunks of whole lines *with their terminators* (so ``\\r\\n`` under ``\\n`` front
matter, a missing final newline or a BOM come back as they were), each with up
to :data:`CONTEXT` neighbouring lines on either side, plus the sha256 of the
file after the edit.

:meth:`Patch.revert` undoes the edit on the file as it is now:

* **exact** — the file is byte-for-byte what the edit wrote (its sha256 matches):
  the old bytes come back exactly, front matter included;
* **placed** — the file was edited since: each hunk is found by its content and
  its neighbours, never by its old line number (a line the user inserted above
  does not move the undo into the user's paragraph). A hunk must be placed
  unambiguously — its lines present, the best position sharing strictly more
  non-blank context than any other — or the whole revert is refused (``None``),
  so an undo never guesses. A hunk that only touched front matter (memoryd's
  ``updated:`` stamp) is left as it is when it cannot be placed: losing a stale
  timestamp is not losing the user's words.

Pure functions over ``str``; no I/O.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import re
from dataclasses import dataclass
from typing import Any

CONTEXT = 3
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """``text``'s lines with their terminators (``\\r\\n``, ``\\n``, ``\\r``); ``"".join`` gives ``text`` back."""
    return _LINE.findall(text)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Hunk:
    """Lines ``new`` of the edited file stood, before the edit, as ``old``.

    ``at`` is the 0-based line where ``new`` starts in the edited file (only a
    hint once the file changed); ``before``/``after`` are the edited file's
    neighbouring lines; ``meta`` marks a hunk inside front matter.
    """

    at: int
    old: tuple[str, ...]
    new: tuple[str, ...]
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    meta: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "old": list(self.old), "new": list(self.new),
                               "before": list(self.before), "after": list(self.after)}
        if self.meta:
            out["meta"] = True
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Hunk:
        return cls(int(raw["at"]), _strs(raw["old"]), _strs(raw["new"]), _strs(raw.get("before", [])),
                   _strs(raw.get("after", [])), bool(raw.get("meta", False)))


@dataclass(frozen=True)
class Patch:
    """The hunks of one edit and the sha256 of what it wrote (see the module docstring)."""

    hunks: tuple[Hunk, ...]
    post_sha: str

    @classmethod
    def between(cls, old: str, new: str, context: int = CONTEXT) -> Patch:
        a, b = split_lines(old), split_lines(new)
        fm_end = _front_matter_end(b)
        hunks = []
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            hunks.append(Hunk(j1, tuple(a[i1:i2]), tuple(b[j1:j2]), tuple(b[max(0, j1 - context):j1]),
                              tuple(b[j2:j2 + context]), meta=j1 > 0 and j2 <= fm_end))
        return cls(tuple(hunks), sha256_text(new))

    @property
    def old_lines(self) -> list[str]:
        """Every line the edit removed or changed, in order (what the undo will bring back)."""
        return [line for h in self.hunks for line in h.old]

    def to_json(self) -> dict[str, Any]:
        return {"post_sha": self.post_sha, "hunks": [h.to_json() for h in self.hunks]}

    @classmethod
    def from_json(cls, raw: Any) -> Patch | None:
        """The patch a history record kept, or None for a record without one (older memoryd) or a mangled one."""
        try:
            return cls(tuple(Hunk.from_json(h) for h in raw["hunks"]), str(raw["post_sha"]))
        except (KeyError, TypeError, ValueError):
            return None

    def revert(self, current: str) -> tuple[str, bool] | None:
        """``(text, exact)``: ``current`` with the edit undone, and whether it was the exact case; None when
        a hunk cannot be placed safely (nothing is changed then)."""
        lines = split_lines(current)
        if sha256_text(current) == self.post_sha:
            for h in sorted(self.hunks, key=lambda h: h.at, reverse=True):
                lines[h.at:h.at + len(h.new)] = list(h.old)
            return "".join(lines), True
        where: dict[str, list[int]] = {}
        for i, line in enumerate(lines):
            where.setdefault(line, []).append(i)
        placed: list[tuple[int, Hunk]] = []
        for h in self.hunks:
            at = _place(lines, h, where)
            if at is None:
                if h.meta:
                    continue
                return None
            placed.append((at, h))
        spans = sorted((at, at + len(h.new)) for at, h in placed)
        if any(e > s2 for (_, e), (s2, _) in itertools.pairwise(spans)):
            return None  # two hunks claimed overlapping lines: not safe
        order = sorted(range(len(placed)), key=lambda i: (placed[i][0], i), reverse=True)
        for at, h in (placed[i] for i in order):  # bottom-up; of two at one place, the later goes in first
            lines[at:at + len(h.new)] = list(h.old)
        return "".join(lines), False


    def written_in(self, current: str) -> bool:
        """Whether ``current`` shows this edit done, though it may hold other changes too: every hunk's
        new lines stand in place (a removal: its neighbours meet again) and none of its old lines still
        stand there. Journal recovery records an edit only when it can see it
        (:func:`memoryd.indexer.write.recovery.recover`); ambiguity answers False."""
        lines = split_lines(current)
        where: dict[str, list[int]] = {}
        for i, line in enumerate(lines):
            where.setdefault(line, []).append(i)
        for h in self.hunks:
            if h.meta:
                continue
            if _place(lines, h, where) is None:
                return False
            undone = Hunk(h.at, h.new, h.old, h.before, h.after)  # the old lines, where the edit took them
            if any(x.strip() for x in h.old) and _place(lines, undone, where) is not None:
                return False
        return True

def _place(lines: list[str], h: Hunk, where: dict[str, list[int]]) -> int | None:
    """Where hunk ``h``'s ``new`` lines are in ``lines`` now: the one position whose neighbours agree best.

    ``where`` maps each line of ``lines`` to its positions, so only positions that share a line with
    the hunk are tried (linear in the hunks, not in hunks x lines).
    """
    n = len(h.new)
    scored: list[tuple[int, int, int]] = []  # (non-blank context agreeing, -distance to the old line, position)
    for at in sorted(_candidates(h, where)):
        if at < 0 or at + n > len(lines) or lines[at:at + n] != list(h.new):
            continue
        score = _agree(reversed(h.before), reversed(lines[:at])) + _agree(iter(h.after), iter(lines[at + n:]))
        scored.append((score, -abs(at - h.at), at))
    if not scored:
        return None
    scored.sort(reverse=True)
    best = scored[0]
    if n == 0 and best[0] == 0:
        return None  # an insertion with no neighbour left to anchor it
    if len(scored) > 1 and scored[1][0] == best[0] and (n == 0 or best[0] == 0 or not _distinct(h)):
        return None  # two places fit equally well
    return best[2]


def _candidates(h: Hunk, where: dict[str, list[int]]) -> set[int]:
    """Positions where ``h`` could start: its first new line, or one implied by a non-blank neighbour."""
    if h.new:
        return set(where.get(h.new[0], ()))
    out: set[int] = set()
    for k, line in enumerate(reversed(h.before), start=1):
        if line.strip():
            out.update(p + k for p in where.get(line, ()))
    for k, line in enumerate(h.after):
        if line.strip():
            out.update(p - k for p in where.get(line, ()))
    return out


def _agree(want: Any, have: Any) -> int:
    """How many non-blank lines of ``want`` match ``have`` in order, stopping at the first difference."""
    score = 0
    for w, g in zip(want, have, strict=False):
        if w != g:
            break
        score += 1 if w.strip() else 0
    return score


def _distinct(h: Hunk) -> bool:
    """Whether ``h``'s new lines carry text of their own (then ties are broken by the old line number)."""
    return any(line.strip() for line in h.new)


def _front_matter_end(lines: list[str]) -> int:
    """The index of the line closing YAML front matter (0 if there is none)."""
    if not lines or lines[0].lstrip("\ufeff").rstrip("\r\n") != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") in ("---", "..."):
            return i
    return 0


def _strs(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise ValueError("a patch's lines must be a list of strings")
    return tuple(raw)
