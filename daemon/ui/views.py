"""What the pages show, built from the socket's answers: pure functions, no I/O.

Untrusted text (file names, memory content, reasons) leaves here either as a plain ``str`` —
which the templates escape (Jinja2 autoescape) after :func:`visible` made its control and
bidirectional characters visible — or as ``Markup`` that this module built from escaped pieces
(:func:`highlight`). Nothing here passes content through unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape

from memoryd.daemon.client.render import (
    NO_MODEL,
    backlog_text,
    duration_text,
    fresh_text,
    observe_text,
    size_text,
)
from memoryd.daemon.client.termsafe import escape as visible_controls
from memoryd.daemon.ui.words import QueryWords, query_words
from memoryd.indexer.markdown.entrymeta import strip as strip_markers

CONTEXT_LINES = 1  # lines shown around a matched line of a long hit
SHORT_HIT = 8  # a hit of at most this many lines is shown whole
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
# What memoryd.daemon.client.termsafe.escape rewrites (C0 but newline and tab, DEL, C1, bidi controls):
# one search finds the lines that need it, so the common line costs one regex, not three.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(text: str) -> str:
    return visible_controls(text) if _CONTROLS.search(text) else text


def visible(value: object) -> object:
    """Jinja2 ``finalize``: strings get their control and bidi characters shown escaped (``\\x1b``);
    ``Markup`` built here is kept as it is; anything else is left for autoescape."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return _shown(value)


def highlight(line: str, words: QueryWords | None) -> Markup:
    """``line`` escaped (controls made visible first), with the query's content words in ``<mark>``."""
    line = _shown(line)
    if words is None:
        return escape(line)
    out, last = [], 0
    for start, end in words.finditer(line):
        out += [escape(line[last:start]), Markup("<mark>"), escape(line[start:end]), Markup("</mark>")]
        last = end
    out.append(escape(line[last:]))
    return Markup("").join(out)


@dataclass
class HitLine:
    number: int | None  # None: an elision ("…")
    html: Markup
    matched: bool = False


@dataclass
class Hit:
    href: str
    where: str
    heading: str
    score: float
    lines: list[HitLine]
    explain: list[tuple[str, str]] = field(default_factory=list)
    extra: list[tuple[str, str]] = field(default_factory=list)


def file_href(path: str, start: int | None = None, end: int | None = None, anchor: int | None = None,
              lines: Iterable[int] = ()) -> str:
    """The file view's URL; ``lines`` (else ``start``-``end``) highlighted, ``anchor`` scrolled to."""
    params: dict[str, str] = {"path": path}
    marked = ",".join(str(n) for n in sorted(set(lines)))
    if marked:
        params["hl"] = marked
    elif start is not None:
        params["hl"] = f"{start}-{end or start}"
    return "/file?" + urlencode(params) + (f"#L{anchor}" if anchor is not None else "")


def hits(result: dict[str, Any], query: str) -> list[Hit]:
    """The search result's hits, each with its matched lines marked and the query's words highlighted."""
    pattern = query_words(query)
    several_roots = bool(result.get("roots"))
    return [_hit(h, pattern, several_roots) for h in result.get("hits", [])]


def _hit(h: dict[str, Any], pattern: QueryWords | None, several_roots: bool) -> Hit:
    """One hit; its explain rows only when the daemon sent ``explain`` (the page asked for it)."""
    start, end = int(h.get("start_line", 1)), int(h.get("end_line", 1))
    matched = [n for n in h.get("match_lines") or [] if start <= n <= end]
    path = f"{h.get('root', '').rstrip('/')}/{h['path']}" if several_roots and h.get("root") else h["path"]
    texts = h.get("text", "").split("\n")
    lines = _hit_lines(texts, start, set(matched), pattern)
    extra = [(k, str(h[k])) for k in ("importance", "reinforcements") if h.get(k) is not None]
    return Hit(href=file_href(path, start, end, min(matched) if matched else start, lines=matched),
               where=f"{path}:{start}-{end}",
               heading=h.get("heading") or "", score=float(h.get("score") or 0.0), lines=lines,
               explain=_explain_rows(h) if "explain" in h else [], extra=extra)


def _hit_lines(texts: Sequence[str], start: int, matched: set[int], pattern: QueryWords | None) -> list[HitLine]:
    """Every line of a short hit; of a long one, the matched lines with a line around each, ``…`` between."""
    shown = set(range(start, start + len(texts)))
    if len(texts) > SHORT_HIT and matched:
        shown = {n + d for n in matched for d in range(-CONTEXT_LINES, CONTEXT_LINES + 1)} & shown
    elif len(texts) > SHORT_HIT:
        shown = set(range(start, start + SHORT_HIT))
    out: list[HitLine] = []
    previous = None
    for n in sorted(shown):
        if previous is not None and n != previous + 1:
            out.append(HitLine(None, Markup("…")))
        text = texts[n - start]
        text = strip_markers(text) if "<!--" in text else text
        out.append(HitLine(n, highlight(text, pattern if n in matched else None), matched=n in matched))
        previous = n
    return out


def _explain_rows(h: dict[str, Any]) -> list[tuple[str, str]]:
    ex = h.get("explain")
    rows = [("vector score", _num(h.get("vector_score"))), ("keyword score", _num(h.get("text_score")))]
    if not isinstance(ex, dict):
        return rows
    for key, value in ex.items():
        if isinstance(value, dict):
            rows += [(f"{key}.{k}", _num(v)) for k, v in value.items()]
        elif isinstance(value, list):
            rows.append((key, ", ".join(_num(v) for v in value)))
        else:
            rows.append((key, _num(value)))
    return rows


def _num(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def analysis_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """``explain``: what the daemon did with the query (intent, synonyms, fallback, keyword plan)."""
    rows: list[tuple[str, str]] = []
    qa = result.get("query_analysis") or {}
    if qa:
        rows.append(("intent", ", ".join(qa.get("intent") or []) or "none"))
        rows += [(f"synonyms of {k}", ", ".join(v)) for k, v in (qa.get("synonyms") or {}).items()]
        if qa.get("fallback"):
            rows.append(("fallback", str(qa["fallback"])))
    if result.get("query_searched"):
        rows.append(("query searched", str(result["query_searched"])))
    plan = result.get("keyword_plan") or {}
    for key in ("dropped_terms", "absent_terms"):
        if plan.get(key):
            rows.append((key.replace("_", " "), ", ".join(map(str, plan[key]))))
    return rows


@dataclass
class FileLine:
    number: int
    text: str
    marked: bool


def file_lines(result: dict[str, Any], marked: Iterable[int]) -> list[FileLine]:
    """The lines ``get`` returned, numbered from its ``start_line``; ``<!-- memoryd: … -->`` markers (an
    entry's importance and reinforcements) are memoryd's bookkeeping, never shown as text."""
    text = result.get("text", "")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    first, keep = int(result.get("start_line", 1)), set(marked)
    return [FileLine(first + i, strip_markers(line) if "<!--" in line else line, first + i in keep)
            for i, line in enumerate(lines)]


FILE_PAGE = 500  #: lines of a file per page: a 20,000-line file is 40 pages, never 3 MB of HTML at once


def page_start(start: int | None, marked: Iterable[int]) -> int:
    """The first line of the page to show: ``start`` (rounded to a page), else the page of the first
    marked line (a hit's link), else 1."""
    first = start or min(marked, default=1)
    return (max(first, 1) - 1) // FILE_PAGE * FILE_PAGE + 1


def file_pager(path: str, result: dict[str, Any], hl: str | None) -> list[tuple[str, str | None]]:
    """(label, href or None) links around the page of ``result``: first, previous, next, last."""
    total, start = int(result.get("total_lines") or 0), int(result.get("start_line") or 1)
    if total <= FILE_PAGE:
        return []
    last = (total - 1) // FILE_PAGE * FILE_PAGE + 1

    def href(at: int) -> str:
        return "/file?" + urlencode({"path": path, "from": at, **({"hl": hl} if hl else {})})

    return [("first", href(1) if start > 1 else None),
            ("previous", href(start - FILE_PAGE) if start > 1 else None),
            ("next", href(start + FILE_PAGE) if start < last else None),
            ("last", href(last) if start < last else None)]


def parse_lines(spec: str | None) -> set[int]:
    """``hl=3-5,9`` → {3, 4, 5, 9}; malformed parts are ignored, a range is capped at 10 000 lines."""
    out: set[int] = set()
    for part in (spec or "").split(",")[:50]:
        a, _, b = part.partition("-")
        if not a.strip().isdigit() or (b and not b.strip().isdigit()):
            continue
        lo, hi = int(a), int(b or a)
        out.update(range(lo, min(hi, lo + 10_000) + 1))
    return out


def section_body(text: str, title: str) -> tuple[int, str] | None:
    """The (heading line, body) of the first section titled ``title`` (case-insensitive) in ``text``;
    the body runs to the next heading of the same or a higher level. None when no heading has it."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if not m or m.group(2).strip().lower() != title.strip().lower():
            continue
        level, body = len(m.group(1)), []
        for later in lines[i + 1:]:
            h = _HEADING.match(later)
            if h and len(h.group(1)) <= level:
                break
            body.append(later)
        return i + 1, "\n".join(body).strip("\n")
    return None


def dashboard(status: dict[str, Any], stats: dict[str, Any] | None) -> dict[str, Any]:
    """The dashboard's rows: freshness, the vector backlog with progress, errors, skipped files, namespaces."""
    vectors = status.get("vectors") or {}
    chunks, pending = int(status.get("chunks") or 0), int(vectors.get("pending") or 0)
    errors = [("daemon", str(status["last_error"]))] if status.get("last_error") else []
    if status.get("last_watch_failure"):
        errors.append(("watcher", str(status["last_watch_failure"])))
    errors += [(str(r.get("path")), str(r["error"])) for r in status.get("roots", []) if r.get("error")]
    storage, model, index = status.get("storage") or {}, status.get("model") or {}, status.get("index") or {}
    if storage and not storage.get("reachable", True):
        errors.append(("storage", str(storage.get("last_error") or storage.get("error") or "unreachable")))
    observed = status.get("observe") or {}
    if observed.get("last_error"):  # a failed extraction wrote only the capture: say so (issue #40)
        errors.append(("extraction", f"{observed['last_error']} (captured only; retried at the next observe)"))
    return {
        "fresh": bool(status.get("fresh", not status.get("pending") and not status.get("reconciling"))),
        "fresh_text": fresh_text(status),
        "facts": [
            ("version", f"{status.get('version', '?')} (pid {status.get('pid', '?')}, "
                        f"up {duration_text(status.get('uptime_s'))})"),
            ("files / chunks", f"{status.get('files', 0)} / {chunks}"),
            ("changes pending", str(status.get("pending", 0))),
            ("last reconcile", str(status.get("last_reconcile") or "not yet")),
            ("model", f"{model.get('id')} ({model.get('dim')} d)"),
            ("index", f"{index.get('type')}, {index.get('vectors')} vectors"),
            ("storage", f"{storage.get('backend', '?')}: {storage.get('where', '?')}"),
            ("data dir", f"{status.get('data_dir', '?')} ({size_text(status.get('data_dir_bytes'))})"),
            ("memory (RSS)", size_text(status.get("rss_bytes"))),
            *([("conversations", observe_text(observed))] if observed else []),
        ],
        "roots": status.get("roots", []),
        "vectors_pending": pending,
        "vectors_done": max(chunks - pending, 0),
        "vectors_total": max(chunks, pending, 1),
        "vectors_text": backlog_text(vectors),
        "eta": duration_text(vectors["eta_s"]) if pending and vectors.get("eta_s") is not None else None,
        "errors": errors,
        "skipped": status.get("skipped", []),
        "namespaces": sorted((stats or {}).get("namespaces", {}).items()),
        "total": (stats or {}).get("total"),
        "busy": bool(pending or status.get("reconciling") or status.get("pending")),
    }


def who(session: object) -> str:
    """``owner``, ``direct:alice``, ``group:dev``: an audit or history record's session in one word."""
    if not isinstance(session, dict):
        return "?"
    kind = str(session.get("kind", "?"))
    other = session.get("peer") or session.get("group")
    return f"{kind}:{other}" if other else kind


def audit_summary(entries: Sequence[dict[str, Any]]) -> list[tuple[str, list[tuple[str, int]]]]:
    """Per session, how many records of each ``action decision`` the tail holds (most first)."""
    counts: dict[str, dict[str, int]] = {}
    for e in entries:
        key = f"{e.get('action', '?')} {e.get('decision', '?')}"
        per = counts.setdefault(who(e.get("session")), {})
        per[key] = per.get(key, 0) + int(e.get("count") or 1)
    return [(name, sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))) for name, per in sorted(counts.items())]


def abstracts_note(state: str | None, files: dict[str, str | None]) -> str:
    """One line under a file list for the files without an abstract (not one line per file)."""
    if state != "on":
        return NO_MODEL.replace("No abstract yet", "No file abstracts yet")
    missing = sum(1 for a in files.values() if not a)
    if not missing:
        return ""
    return (f"{missing} of {len(files)} files have no abstract yet: the [llm] model writes them at idle time "
            "(anew after each edit).")
