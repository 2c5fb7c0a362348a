"""What ``memoryd mcp`` hands the model: each tool's daemon reply shaped into ``(text, structuredContent)``.

One function per tool (:data:`SHAPERS`), pure and SDK-free like :mod:`memoryd.daemon.client.mcp_tools`,
so each shape is testable without a daemon. The structured part matches the tool's ``outputSchema``;
the text is what a host shows the model when it ignores structured content: the JSON, or a
sentence where a JSON dump would say less (an empty context block, no proposal, an observe).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memoryd.daemon.client.mcp_tools import DEFAULT_CONTEXT_TOKENS
from memoryd.indexer.markdown.entrymeta import strip as strip_markers

SNIPPET_CHARS = 1200
Shaped = tuple[str, dict[str, Any]]


def centred_snippet(text: str, start_line: int, match_lines: list[int], limit: int) -> str:
    """``text`` (a hit's lines from ``start_line``) cut to about ``limit`` characters around its matched lines.

    A hit spans a whole chunk while its evidence is one or two lines, often past the first ``limit``
    characters: the window covers the matched lines (the best one first when they lie far apart), is
    widened line by line on both sides while it fits, and says where it was cut with ``…``.
    """
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    inside = [n - start_line for n in match_lines if 0 <= n - start_line < len(lines)]
    if not inside:
        return text[:limit].rstrip() + " …"
    lo = hi = inside[0]
    for i in sorted(inside[1:], key=lambda i: abs(i - inside[0])):
        if _span(lines, min(lo, i), max(hi, i)) <= limit:
            lo, hi = min(lo, i), max(hi, i)
    while True:
        grown = False
        for lo2, hi2 in ((lo - 1, hi), (lo, hi + 1)):
            if lo2 >= 0 and hi2 < len(lines) and _span(lines, lo2, hi2) <= limit:
                lo, hi, grown = lo2, hi2, True
        if not grown:
            break
    body, cut_tail = "\n".join(lines[lo:hi + 1]), hi < len(lines) - 1
    if len(body) > limit:  # one matched line longer than the limit: its head
        body, cut_tail = body[:limit].rstrip(), True
    return ("… " if lo > 0 else "") + body + (" …" if cut_tail else "")


def _span(lines: list[str], lo: int, hi: int) -> int:
    return sum(len(line) + 1 for line in lines[lo:hi + 1]) - 1



def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1)


def _search(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    results = []
    for h in res.get("hits", []):
        text = strip_markers(h.get("text", ""))  # importance/reinforcement markers: metadata, not memory text
        matched = [int(n) for n in h.get("match_lines") or []]  # best first (memoryd.indexer.search.matchlines)
        snippet = centred_snippet(text, h["start_line"], matched, SNIPPET_CHARS)
        cite = f"{h['path']}:{h['start_line']}-{h['end_line']}"
        results.append({"path": h["path"], "startLine": h["start_line"], "endLine": h["end_line"],
                        "score": round(float(h.get("score", 0.0)), 4), "snippet": snippet,
                        "heading": h.get("heading") or "", "citation": cite, "root": h.get("root"),
                        "matchLines": matched})
    out = {"results": results, "mode": res.get("mode", args.get("mode", "hybrid")),
           "tookMs": round(float(res.get("took_ms") or 0.0), 1)}
    return _json(out), out


def _get(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    out = {"path": res["path"], "root": res.get("root"), "from": res["start_line"], "to": res["end_line"],
           "totalLines": res.get("total_lines"), "text": res.get("text", "")}
    return _json(out), out


def _context(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    sources = [{"path": s["path"], "startLine": s["start_line"], "endLine": s["end_line"], "score": s.get("score"),
                "root": s.get("root")} for s in res.get("sources", [])]
    budget = res.get("max_tokens") or args.get("max_tokens", DEFAULT_CONTEXT_TOKENS)
    out = {"text": res.get("text", ""), "tokens": res.get("tokens"), "maxTokens": budget,
           "sources": sources, "omitted": res.get("omitted", 0), "abstained": bool(res.get("abstained"))}
    if res.get("reason"):
        out["reason"] = res["reason"]
    return out["text"] or "No stored memory is relevant to this query.", out


def _remember(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    out = dict(res)
    if res.get("path") and res.get("line"):
        out["citation"] = f"{res['path']}:{res['line']}"
    return _json(out), out


def _status(args: dict[str, Any], st: dict[str, Any]) -> Shaped:
    roots = [{"path": r.get("path"), "watched": bool(r.get("alive")), "error": r.get("error")}
             for r in st.get("roots", [])]
    fresh = st["fresh"] if "fresh" in st else st.get("pending", 1) == 0 and not st.get("reconciling", True)
    out = {"fresh": fresh, "files": st.get("files"),
           "chunks": st.get("chunks"), "pending": st.get("pending"), "reconciling": st.get("reconciling"),
           "lastEvent": st.get("last_event"), "lastReconcile": st.get("last_reconcile"),
           "lastError": st.get("last_error"), "skippedFiles": len(st.get("skipped") or []), "roots": roots,
           "model": (st.get("model") or {}).get("id"), "version": st.get("version")}
    return _json(out), out


def _list(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    entries = [{"path": e["path"], "startLine": e["start_line"], "endLine": e["end_line"], "text": e["text"],
                "citation": f"{e['path']}:{e['start_line']}-{e['end_line']}", "namespace": e.get("namespace"),
                "type": e.get("type"), "section": e.get("section"), "importance": e.get("importance"),
                "reinforcements": e.get("reinforcements"), "created": e.get("created"), "updated": e.get("updated")}
               for e in res.get("entries", [])]
    out = {"entries": entries, "nextCursor": res.get("next_cursor")}
    return _json(out), out


def _bank_propose(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    proposal = res.get("proposal")
    out = {"text": "" if proposal is None else str(proposal.get("text", "")), "proposal": proposal}
    return out["text"] or "Nothing to propose: show no proposal.", out


def _observe(args: dict[str, Any], res: dict[str, Any]) -> Shaped:
    extraction = res.get("extraction") or {}
    out = {"note": res.get("note", ""), "captured": res.get("captured", 0), "seen": res.get("seen", 0),
           "bytes": res.get("bytes", 0), "withheld_lines": res.get("withheld_lines", 0),
           "pending": res.get("pending", 0), "expired": list(res.get("expired") or []), "extraction": extraction}
    where = f" in {out['note']}" if out["note"] else ""
    text = (f"Captured {out['captured']} new turn(s){where}; {out['seen']} already seen. "
            f"Extraction: {extraction.get('state', 'off')}.")
    return text, out


SHAPERS: dict[str, Callable[[dict[str, Any], Any], Shaped]] = {
    "memory_search": _search, "memory_get": _get, "memory_context": _context, "memory_remember": _remember,
    "memory_status": _status, "memory_list": _list, "memory_update_section": _remember, "memory_promote": _remember,
    "memory_bank_propose": _bank_propose, "memory_observe": _observe,
}
