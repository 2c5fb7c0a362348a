"""Human-readable output of the client commands (``--json`` bypasses all this)."""

from __future__ import annotations

import re
import shutil
from typing import Any

from memoryd.daemon.client.termsafe import escape_line

_TARGET = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")


def parse_target(target: str) -> dict[str, Any]:
    """``PATH[:START[-END]]`` → ``get`` params."""
    m = _TARGET.match(target)
    params: dict[str, Any] = {"path": target}
    if m:
        params["path"] = m["path"]
        if m["start"]:
            params["start_line"] = int(m["start"])
            params["end_line"] = int(m["end"] or m["start"])
    return params


def _snippet(text: str, width: int, lines: int = 3) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.strip():
            out.append("    " + (line if len(line) <= width - 4 else line[: width - 5] + "…"))
        if len(out) == lines:
            break
    return out


def render_hits(result: dict[str, Any]) -> str:
    hits = result.get("hits", [])
    if not hits:
        return result.get("reason") or f"no match ({result.get('took_ms', 0):.0f} ms)"
    width = shutil.get_terminal_size((100, 20)).columns
    out = []
    for h in hits:
        # a name stays on its line (a newline in a file name must not forge a hit); see memoryd.daemon.client.termsafe
        head = f"{escape_line(h['path'])}:{h['start_line']}-{h['end_line']}  {h['score']:.3f}"
        if h.get("heading"):
            head += f"  [{escape_line(h['heading'])}]"
        out.append(head)
        if "explain" in h:
            e = h["explain"]
            out.append(f"    [{e['fusion']}] vector rank {e['vector_rank']} (cosine {e['cosine']:.3f}), "
                       f"keyword rank {e['keyword_rank']} (bm25 {e['bm25']}), keyword norm {h['text_score']:.3f}")
            out.extend(f"    + lines {m['start_line']}-{m['end_line']}: vector rank {m['vector_rank']} "
                       f"(cosine {m['cosine']:.3f}), keyword rank {m['keyword_rank']} (bm25 {m['bm25']})"
                       for m in e.get("merged", []))
        out += _snippet(h.get("text", ""), width)
    plan = result.get("keyword_plan")
    if plan and not plan.get("exact", True):
        dropped = ", ".join(plan.get("dropped_terms", [])) or "none"
        out.append(f"(keyword scores bounded: rare terms over every chunk, the rest among the newest; "
                   f"too common to score: {dropped})")
    if "query_searched" in result:  # a transcript's speaker labels were removed (memoryd.indexer.search.querytext)
        shown = " / ".join(result["query_searched"].splitlines())
        out.append(f"(searched as: {shown[:200]})")
    out.append(f"({len(hits)} hits, {result.get('took_ms', 0):.1f} ms, {result.get('mode', '')})")
    return "\n".join(out)


def render_status(st: dict[str, Any]) -> str:
    rows = [
        ("version", st.get("version", "")),
        ("uptime", f"{st.get('uptime_s', 0):.0f} s"),
        ("files / chunks", f"{st.get('files')} / {st.get('chunks')}"),
        ("pending", str(st.get("pending"))),
        ("reconciling", str(st.get("reconciling"))),
        ("model", "{id} ({dim} d, {queries} queries)".format(**{"queries": "exact", **st.get("model", {})})),
        ("index", f"{st.get('index', {}).get('type')}, {st.get('index', {}).get('vectors')} vectors"),
        ("cache", "{entries} entries, {hits} hits, {misses} misses".format(**st.get("cache", {}))),
        ("last reconcile", str(st.get("last_reconcile"))),
    ]
    for root in st.get("roots", []):
        state = "watching" if root.get("alive") else "NOT WATCHING"
        rows.append((f"root {escape_line(str(root.get('path')))}", f"{state} ({root.get('backend')}), last event "
                     f"{root.get('last_event')}" + (f", error: {root['error']}" if root.get("error") else "")))
    rows += [("skipped", escape_line(f"{sk['path']}: {sk['reason']}")) for sk in st.get("skipped", [])]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def render_reindex(result: dict[str, Any]) -> str:
    if result.get("done"):
        return f"reindexed {result.get('files', 0)} files ({result.get('took_ms', 0):.0f} ms)"
    return f"queued {result.get('queued', 0)} paths"
