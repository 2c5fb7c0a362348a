"""Dates named in a query, matched against the dates of memory files.

Memory is kept in dated files (``memory/YYYY-MM-DD.md``), and a question that
names a time ("what did I decide in October 2023?", "on May 3, 2023",
"2023年10月") asks about the notes written then. BM25 sees such a date only as
weak words ("octob", "2023") that many sessions share, so the searcher gives
chunks of files whose date matches a small boost (:mod:`memoryd.indexer.storage.embedded.hybrid`).

Understood forms: ISO ``2023-10-13`` / ``2023/10/13``; ``October 13, 2023``,
``13 October 2023`` (full or three-letter month names, optional ordinal
suffix); ``October 2023``; a full month name alone (``May`` only when
capitalised — "may" is a verb); a year 1900–2099 alone; Chinese ``2023年10月13日``,
``2023年10月``, ``10月13日`` / ``10月13号``, ``10月``, ``2023年``. A full date matches
files within ``DAY_SLACK_DAYS`` (a note is often written a few days after the
event it records); a month, a month of a year, or a year match exactly.

Pure functions; the query is read at most ``MAX_QUERY_CHARS`` from its end.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

DAY_SLACK_DAYS = 7
MAX_QUERY_CHARS = 4096

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?" \
       r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ymd", re.compile(rf"\b{_YEAR}[-/](\d{{1,2}})[-/](\d{{1,2}})\b")),
    ("mdy", re.compile(rf"\b{_MON}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("dmy", re.compile(rf"\b{_DAY}\s+{_MON},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("my", re.compile(rf"\b{_MON},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("cjk_ymd", re.compile(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")),
    ("cjk_ym", re.compile(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月")),
    ("cjk_md", re.compile(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")),
    ("cjk_m", re.compile(r"(\d{1,2})\s*月")),
    ("cjk_y", re.compile(r"((?:19|20)\d\d)\s*年")),
    ("m", re.compile(r"\b(" + "|".join(_MONTHS) + r")\b", re.IGNORECASE)),
    ("y", re.compile(rf"\b{_YEAR}\b")),
)
_VERBS = frozenset({"may", "march"})
_FILE_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


@dataclass(frozen=True)
class DateSpec:
    """A date named in a query; a field is None when the query leaves it open."""

    year: int | None
    month: int | None
    day: int | None = None

    def matches(self, day: dt.date) -> bool:
        """True when ``day`` (a file's date) falls within this spec."""
        if self.year and self.month and self.day:
            try:
                named = dt.date(self.year, self.month, self.day)
            except ValueError:
                return False
            return abs((day - named).days) <= DAY_SLACK_DAYS
        if self.month and self.day:
            return (day.month, day.day) == (self.month, self.day)
        if self.year and self.month:
            return (day.year, day.month) == (self.year, self.month)
        if self.month:
            return day.month == self.month
        return day.year == self.year


def query_dates(query: str) -> list[DateSpec]:
    """Every date the query names, most specific forms first; [] when it names none.

    A span used by a more specific form is not read again (``October 2023``
    is one month of one year, not also "any October" and "any day in 2023").
    """
    text = query[-MAX_QUERY_CHARS:]
    out: list[DateSpec] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            spec = _spec(kind, m)
            if spec is not None and spec.month in (None, *range(1, 13)):
                out.append(spec)
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    return list(dict.fromkeys(out))


def file_date(path: str) -> dt.date | None:
    """The ``YYYY-MM-DD`` in a file's name (``memory/2023-10-13.md``), else None."""
    m = _FILE_DATE.search(PurePosixPath(path).name)
    if not m:
        return None
    try:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def matching_paths(specs: list[DateSpec], paths: set[str]) -> set[str]:
    """The paths whose file date matches any of ``specs``."""
    if not specs:
        return set()
    out = set()
    for path in paths:
        day = file_date(path)
        if day is not None and any(s.matches(day) for s in specs):
            out.add(path)
    return out


def _month(name: str) -> int:
    return _MONTHS.index(next(m for m in _MONTHS if m.startswith(name.lower().rstrip(".")[:3]))) + 1


def _spec(kind: str, m: re.Match[str]) -> DateSpec | None:
    g = m.groups()
    if kind == "ymd" or kind == "cjk_ymd":
        return DateSpec(int(g[0]), int(g[1]), int(g[2]))
    if kind == "mdy":
        return DateSpec(int(g[2]), _month(g[0]), int(g[1]))
    if kind == "dmy":
        return DateSpec(int(g[2]), _month(g[1]), int(g[0]))
    if kind == "my":
        return DateSpec(int(g[1]), _month(g[0]))
    if kind == "cjk_ym":
        return DateSpec(int(g[0]), int(g[1]))
    if kind == "cjk_md":
        return DateSpec(None, int(g[0]), int(g[1]))
    if kind == "cjk_m":
        return DateSpec(None, int(g[0]))
    if kind == "cjk_y":
        return DateSpec(int(g[0]), None)
    if kind == "m":
        # "may" and "march" are verbs far more often than months unless capitalised.
        word = m.group(0)
        return None if word.lower() in _VERBS and not word.istitle() else DateSpec(None, _month(word))
    return DateSpec(int(g[0]), None)
