"""Human-readable output of the client commands (``--json`` bypasses all this)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from memoryd.daemon.api.vocabulary import HitReply, SearchReply, StatusReply, WriteReply
from memoryd.daemon.client.termsafe import escape, escape_line
from memoryd.indexer.markdown.entrymeta import strip as strip_markers

_RANGE = re.compile(r"(?P<start>\d+)(?:-(?P<end>\d+))?")


class TargetError(ValueError):
    """A ``get`` target whose line range cannot be read: a usage error (exit 2), never a path to look up."""


def parse_target(target: str) -> dict[str, Any]:
    """``PATH[:START[-END]]`` → ``get`` params; :class:`TargetError` for a range that is not one.

    What follows the last ``:`` is a range when it holds no ``/`` and no ``.`` (a Markdown file's name
    ends in ``.md``, so ``notes:v2/a.md`` and ``a:b.md`` stay paths): ``FILE:abc``, ``FILE:10-``,
    ``FILE:0`` and ``FILE:9-3`` are refused here instead of being looked up as files named so.
    """
    path, colon, suffix = target.rpartition(":")
    if not colon or not path or "/" in suffix or "." in suffix:
        return {"path": target}
    m = _RANGE.fullmatch(suffix)
    if m is None:
        raise TargetError(f"bad line range {suffix!r} in {target!r}: give PATH, PATH:START or PATH:START-END "
                          "(lines are 1-based)")
    start = int(m["start"])
    end = int(m["end"] or m["start"])
    if start < 1 or end < start:
        raise TargetError(f"bad line range {suffix!r} in {target!r}: lines are 1-based and END >= START")
    return {"path": path, "start_line": start, "end_line": end}


def _snippet(text: str, width: int | None, lines: int = 3) -> list[str]:
    out = []
    for line in strip_markers(text).splitlines():
        if line.strip():
            out.append("    " + _clip(line, None if width is None else width - 4))
        if len(out) == lines:
            break
    return out


def _clip(line: str, width: int | None) -> str:
    """``line`` cut to ``width`` columns with ``…``; ``None``: whole (a pipe, where a cut would lose text)."""
    return line if width is None or len(line) <= width else line[: max(width - 1, 1)] + "…"


BOLD, DIM, RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"
TERM, TERM_END = "\x1b[33m", "\x1b[39m"  # a matched term: yellow inside the bold line (the bold stays)
_WORD = re.compile(r"\w+")


def _terms_marked(text: str, terms: frozenset[str]) -> str:
    """``text`` escaped, each word whose analysed terms meet ``terms`` (the query's) coloured."""
    if not terms:
        return escape(text)
    out, at = [], 0
    for m in _WORD.finditer(text):
        if terms.intersection(_word_terms(m.group())):
            out += [escape(text[at:m.start()]), TERM, escape(m.group()), TERM_END]
            at = m.end()
    out.append(escape(text[at:]))
    return "".join(out)


@lru_cache(maxsize=4096)
def _word_terms(word: str) -> frozenset[str]:
    """A word's terms as the keyword index analyses them (stemmed, CJK bigrams): what the query matched."""
    from memoryd.indexer.search.keyword import query_terms  # lazily: a terminal's highlighting only

    return frozenset(query_terms(word))


def query_terms_of(query: str | None) -> frozenset[str]:
    """The analysed terms of ``query`` (empty for none): the words :func:`render_hits` highlights."""
    if not query:
        return frozenset()
    from memoryd.indexer.search.keyword import query_terms

    return frozenset(query_terms(query))


def _matched(hit: HitReply, width: int | None, highlight: bool, terms: frozenset[str]) -> list[str]:
    """The hit's matched lines, numbered (``  12│ text``); bold on a terminal, the query's terms coloured.
    Content is escaped here, since highlighted output bypasses the escaping stream (see
    :mod:`memoryd.daemon.client.termsafe`)."""
    lines = hit.get("text", "").split("\n")
    out = []
    for n in sorted(hit["match_lines"]):
        offset = n - hit["start_line"]
        if not 0 <= offset < len(lines):
            continue
        number = f"{n:>6}│ "
        raw = _clip(strip_markers(lines[offset]).strip(), None if width is None else width - len(number))
        out.append(f"{DIM}{number}{RESET}{BOLD}{_terms_marked(raw, terms)}{RESET}" if highlight
                   else number + escape(raw))
    return out


def _location(hit: HitReply, show_root: bool) -> str:
    """``path:a-b``; with several roots, the absolute path, which ``memoryd get`` takes as it is."""
    path = f"{hit['root'].rstrip('/')}/{hit['path']}" if show_root and hit.get("root") else hit["path"]
    return f"{escape_line(path)}:{hit['start_line']}-{hit['end_line']}"


def render_hits(result: SearchReply, highlight: bool = False, width: int | None = None,
                query: str | None = None) -> str:
    """Hits for a person: location, score, heading, then the lines that matched (the first lines for a
    daemon that does not name them). ``highlight``: terminal bold for the matched lines, with the words
    that carry ``query``'s terms coloured. ``width``: cut lines to that many columns with ``…`` (a
    terminal's width); None keeps every line whole, so a script or a model reading a pipe loses nothing."""
    hits = result.get("hits", [])
    if not hits:
        return escape(result.get("reason") or f"no match ({result.get('took_ms', 0):.0f} ms)")
    terms = query_terms_of(query) if highlight else frozenset()
    show_root = result.get("roots", 1) > 1 or len({h.get("root") for h in hits}) > 1
    out = []
    for h in hits:
        # a name stays on its line (a newline in a file name must not forge a hit); see memoryd.daemon.client.termsafe
        head = f"{_location(h, show_root)}  {h['score']:.3f}"
        if h.get("heading"):
            head += f"  [{escape_line(h['heading'])}]"
        out.append(head)
        if "explain" in h:
            e = h["explain"]
            vector = "vector: pending" if e.get("vector") == "pending" else \
                f"vector rank {e['vector_rank']} (cosine {e['cosine']:.3f})"
            out.append(f"    [{e['fusion']}] {vector}, "
                       f"keyword rank {e['keyword_rank']} (bm25 {e['bm25']}), keyword norm {h['text_score']:.3f}")
            out.extend(f"    + lines {m['start_line']}-{m['end_line']}: vector rank {m['vector_rank']} "
                       f"(cosine {m['cosine']:.3f}), keyword rank {m['keyword_rank']} (bm25 {m['bm25']})"
                       for m in e.get("merged", []))
        shown = _matched(h, width, highlight, terms) if h.get("match_lines") else []
        out += shown or [escape(line) for line in _snippet(h.get("text", ""), width)]
    plan = result.get("keyword_plan")
    if plan and not plan.get("exact", True):
        dropped = ", ".join(plan.get("dropped_terms", [])) or "none"
        out.append(escape(f"(keyword scores bounded: rare terms over every chunk, the rest among the newest; "
                          f"too common to score: {dropped})"))
    out += _analysis_lines(result.get("query_analysis"))
    if "query_searched" in result:  # a transcript's speaker labels were removed (memoryd.indexer.search.querytext)
        shown_query = " / ".join(result["query_searched"].splitlines())
        out.append(escape(f"(searched as: {shown_query[:200]})"))
    out.append(f"({len(hits)} hits, {result.get('took_ms', 0):.1f} ms, {result.get('mode', '')})")
    return "\n".join(out)


def _analysis_lines(analysis: dict[str, Any] | None) -> list[str]:
    """``--explain``: the query's intent, the synonyms its keyword leg added, and a weak-result fallback."""
    if not analysis:
        return []
    out = [f"(intent: {', '.join(analysis.get('intent') or []) or 'none'})"]
    for name, added in (analysis.get("synonyms") or {}).items():
        out.append(f"(synonyms of {escape_line(name)}: {escape_line(', '.join(added))})")
    if analysis.get("legs"):  # vectors pending among the candidates (indexer/search/pending.py)
        out.append(f"({analysis['legs']})")
    fb = analysis.get("fallback")
    if fb:
        out.append(f"(weak result, fallback searched {fb['candidates']} candidates per leg: {fb['reason']})")
    return out


def size_text(n: object) -> str:
    """A byte count for a person: ``12.3 MB``; "unknown" when the daemon could not tell."""
    if not isinstance(n, int | float) or isinstance(n, bool):
        return "unknown"
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"  # pragma: no cover - the loop returns at GB


def duration_text(seconds: object) -> str:
    """Seconds for a person: ``42 s``, ``3 min 5 s``, ``2 h 10 min`` (the CLI and the UI say it alike)."""
    s = int(seconds) if isinstance(seconds, int | float) else 0
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def fresh_text(st: Mapping[str, Any]) -> str:
    """Whether every change seen so far is searchable; an older daemon has no ``fresh``: derive it."""
    pending, reconciling = st.get("pending") or 0, bool(st.get("reconciling"))
    if st.get("fresh", not pending and not reconciling):
        return "yes (every change seen is searchable)"
    why = st.get("stale")  # the daemon's own words: reconciling, vectors filling, a root not watched ...
    if not isinstance(why, list):
        why = ([f"{pending} pending"] if pending else []) + (["reconciling"] if reconciling else [])
    return f"no ({escape_line(', '.join(str(w) for w in why))})" if why else "no"


def render_status(st: StatusReply) -> str:
    """The daemon's status as aligned ``name  value`` rows, in words (no Python ``None``/``True``)."""
    model = {"queries": "exact", **st.get("model", {})}
    rows = [
        ("version", f"{st.get('version', '')}" + (f" (pid {st['pid']})" if st.get("pid") else "")),
        ("socket", escape_line(str(st.get("socket") or "unknown"))),
        ("uptime", duration_text(st.get("uptime_s", 0))),
        ("fresh", fresh_text(st)),
        ("files / chunks", f"{st.get('files')} / {st.get('chunks')}"),
        ("pending", str(st.get("pending", 0))),
        ("vectors pending", backlog_text(st.get("vectors") or {})),
        *_line_rows(st.get("line_vectors")),
        ("reconciling", _reconciling(st)),
        ("model", f"{model.get('id')} ({model.get('dim')} d, {model.get('queries')} queries"
                  + (f", {model['passages']} passages" if model.get("passages") else "")
                  + (f", provider {model['provider']}" if model.get("provider") else "") + ")"),
        *_server_row(model.get("server")),
        *_build_row(st.get("model_build")),
        *_rerank_rows(st.get("rerank")),
        ("index", f"{st.get('index', {}).get('type')}, {st.get('index', {}).get('vectors')} vectors"),
        ("cache", "{entries} entries, {hits} hits, {misses} misses".format(**st.get("cache", {}))),
        ("last reconcile", str(st.get("last_reconcile") or "not yet")),
        ("last error", escape_line(str(st.get("last_error") or "none"))),
    ]
    if st.get("last_watch_failure"):
        rows.append(("watch failure", escape_line(str(st["last_watch_failure"]))))
    rows += _storage_rows(st.get("storage"))
    rows += observe_rows(st.get("observe"))
    rows += [
        ("data dir", escape_line(str(st.get("data_dir") or "unknown")) + f" ({size_text(st.get('data_dir_bytes'))})"),
        ("memory (RSS)", size_text(st.get("rss_bytes"))),
    ]
    for root in st.get("roots", []):
        state = "watching" if root.get("alive") else "NOT WATCHING"
        rows.append((f"root {escape_line(str(root.get('path')))}", f"{state} ({root.get('backend')}), last event "
                     f"{root.get('last_event') or 'none yet'}" + (f", error: {escape_line(str(root['error']))}"
                                                                    if root.get("error") else "")))
    rows += [("skipped", escape_line(f"{sk['path']}: {sk['reason']}")) for sk in st.get("skipped", [])]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def observe_text(obs: Mapping[str, Any]) -> str:
    """``observe`` in one line: what was captured, and what extraction did (issue #40: "says so in status")."""
    if not obs.get("enabled", True):
        return "off (observe.enabled = false)"
    captured = (f"{obs.get('observed', 0)} observes, {obs.get('captured_turns', 0)} turns captured "
                f"({size_text(obs.get('captured_bytes'))})")
    if obs.get("extraction") != "llm":
        why = "observe.extract = false" if obs.get("llm") else "no [llm] model"
        return f"{captured}; extraction off ({why})"
    llm = obs.get("llm") or {}
    tokens = llm.get("tokens") or {}
    spent = f"; {tokens.get('used', 0)} of {tokens.get('daily') or 'unlimited'} tokens today" if tokens else ""
    return (f"{captured}; extraction by {escape_line(str(llm.get('model') or 'the [llm] model'))}: "
            f"{obs.get('extractions', 0)} done, {obs.get('extraction_failures', 0)} failed, "
            f"{obs.get('written', 0)} of {obs.get('proposed', 0)} proposals written{spent}")


def observe_rows(obs: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The ``conversations`` row, and the last failed extraction while it is the latest outcome."""
    if not obs:
        return []
    rows = [("conversations", observe_text(obs))]
    if obs.get("last_error"):
        rows.append(("extraction failed", escape_line(str(obs["last_error"]))
                     + " (captured only; the turns are extracted at the next observe)"))
    return rows


def _build_row(build: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A first start's model build (daemon/model_build.py), until the model is ready."""
    if not build:
        return []
    if build.get("state") == "failed":
        return [("model build", escape_line(f"FAILED: {build.get('error')}; search ranks from keywords only "
                                            "until a restart builds it (the log has model.build_failed)"))]
    return [("model build", escape_line(f"{build.get('detail')}, {duration_text(build.get('elapsed_s') or 0)} so "
                                        "far; search ranks from keywords only meanwhile"))]


def _server_row(server: dict[str, Any] | None) -> list[tuple[str, str]]:
    """An embedding server (provider "openai"): where, and whether it answers (else its last error)."""
    if not server:
        return []
    state = "reachable" if server.get("reachable") else f"unreachable — {server.get('last_error') or 'no answer'}"
    return [("embedding server", escape_line(f"{server.get('url')} ({server.get('server_model')}): {state}"))]


def _storage_rows(sto: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The database backend in words: where, reachable or not since when (and why), the root locks."""
    if not sto:
        return []
    if sto.get("backend") != "postgres":
        return [("storage", escape_line(f"{sto.get('backend')} index in {sto.get('where')}"))]
    since = f" since {sto['since']}" if sto.get("since") else ""
    state = f"reachable{since}" if sto.get("reachable") else \
        f"UNREACHABLE{since}: {sto.get('last_error') or sto.get('error') or 'no answer'}"
    rows = [("storage", escape_line(f"postgres {sto.get('where') or sto.get('database')}, site {sto.get('site')}")),
            ("database", escape_line(state))]
    locks = sto.get("locks") or {}
    rows += [("root lock LOST", escape_line(f"{lost.get('root')}: {lost.get('why')}"))
             for lost in locks.get("lost", [])]
    return rows


def _reconciling(st: Mapping[str, Any]) -> str:
    """``yes: 12/31 files`` while a sweep reads and commits files; ``yes (vectors filling in)`` after it
    while keyword-first chunks wait for their vectors; an older daemon's plain yes/no otherwise."""
    if not st.get("reconciling"):
        return "no"
    sweep = st.get("reconcile") or {}
    state = sweep.get("state")
    if state == "indexing":
        return f"yes: {sweep.get('files_done', 0)}/{sweep.get('files_total', 0)} files"
    if state == "listing":
        return "yes: listing files"
    if state == "queued":
        return "yes: about to start"
    if state == "idle" and (st.get("vectors") or {}).get("pending"):
        return "yes: files done, vectors filling in"
    return "yes"


def _rerank_rows(rr: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``[rerank]`` when on: its server, how often it reordered and how often the fused order stood."""
    if not rr:
        return []
    last = f", last: {escape_line(str(rr['last_error']))}" if rr.get("fallbacks") and rr.get("last_error") else ""
    return [("reranker", f"{escape_line(str(rr.get('url')))} ({rr.get('applied', 0)} reranked, "
                         f"{rr.get('fallbacks', 0)} kept the fused order{last})")]


def _line_rows(lines: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Chunks still without line vectors (embedded when the daemon is idle), while there are any."""
    if not lines or not lines.get("pending"):
        return []
    return [("line vectors", f"{lines['pending']} chunks pending (embedded when idle; until then hits 4+ "
                             f"keep their plain order)")]


def backlog_text(v: Mapping[str, Any]) -> str:
    """``0``, or ``1200 (18.5/s, about 65 s left; ranking from keywords only: 1200 vectors pending)`` while
    keyword-first chunks wait for their vectors."""
    if not v.get("pending"):
        return "0"
    speed = f"{v['per_s']:.1f}/s" if v.get("per_s") else "rate not measured yet"
    eta = f", about {duration_text(v['eta_s'])} left" if v.get("eta_s") is not None else ""
    ranking = v.get("ranking") or f"ranking from keywords only: {v['pending']} vectors pending"
    return f"{v['pending']} ({speed}{eta}; {ranking})"


def render_written(result: WriteReply) -> list[str]:
    """A ``remember`` (or ``promote``) answer in words: what it did, where, and for a replace or a
    reinforcement the entry as it was and the command that takes it back (so a person sees what
    changed without opening the file or the history)."""
    decision, where = result.get("decision", "?"), f"{result.get('path')}:{result.get('line')}"
    if decision not in ("replaced", "reinforced"):
        return [f"{decision}: {where} ({result.get('reason', '')})"]
    head = f"{decision} {escape_line(where)}"
    if result.get("previous") is not None:
        head += f' (was: "{escape_line(str(result["previous"]))}")'
    if result.get("history_id"):
        head += f" — undo: memoryd undo {escape_line(str(result['history_id']))}"
    count = f" (now reinforced {result['reinforcement']}×)" if result.get("reinforcement") else ""
    return [head, f"  {result.get('reason', '')}{count}"]


def render_reindex(result: dict[str, Any]) -> str:
    """``reindex`` in words; a file that was already indexed as it is says "unchanged", not "reindexed 0".

    Each path named that was not indexed gets its own line with the reason (missing, refused by the
    path filter, too large ...): a bare "1 skipped" left the user to guess which and why."""
    return "\n".join([_reindex_head(result)] + [
        f"  not indexed: {escape_line(str(x.get('path')))}: {escape_line(str(x.get('reason')))}"
        for x in result.get("not_indexed", [])])


def _reindex_head(result: dict[str, Any]) -> str:
    if not result.get("done"):
        return f"queued {_files(result.get('queued', 0))}" if "not_indexed" in result \
            else f"queued {result.get('queued', 0)} paths"
    took = f"({result.get('took_ms', 0):.0f} ms)"
    indexed, unchanged = result.get("files", 0), result.get("unchanged", 0)
    others = [f"{result[k]} {k}" for k in ("removed", "skipped") if result.get(k)]
    if not indexed and not others:
        return f"unchanged: {_files(unchanged)} already indexed as on disk {took}" if unchanged \
            else f"nothing to index {took}"
    head = [f"reindexed {_files(indexed)}"] if indexed else []
    return ", ".join(head + others + ([f"{unchanged} unchanged"] if unchanged else [])) + f" {took}"


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


NO_MODEL = "No abstract yet (needs [llm]: a model writes file abstracts at idle time; see docs/conversations.md)."
NOT_YET = "No abstract yet: the [llm] model writes one at idle time (anew after each edit)."


def abstract_note(state: str | None, abstract: str | None) -> str:
    """What the UI's file page and ``memoryd get --abstract`` say when ``abstract`` is None (``state``: the
    daemon's ``abstracts``, on | off); "" when there is one to show."""
    if abstract:
        return ""
    return NOT_YET if state == "on" else NO_MODEL
