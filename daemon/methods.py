"""The socket methods (DESIGN.md, "Socket protocol"): params in, JSON out.

Each handler validates its params (naming the bad one), then calls into the
index or the worker. Handlers run on the server's connection threads; the
index's lock makes searches safe beside the worker.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.jsonrpc import InvalidParams, Peer, RpcError, param, reject_unknown
from daemon.read_access import SESSION_PARAM, check_read, namespace_scope
from daemon.write_methods import build_write_handlers
from indexer.config import SEARCH_MODES
from indexer.errors import FileSkipped
from indexer.files import read_memory_file
from indexer.querytext import clean_query

if TYPE_CHECKING:
    from daemon.app import Daemon

MAX_QUERY_CHARS = 8192
REINDEX_WAIT_S = 300.0
NOT_INDEXED = -32010
TIMEOUT = -32011


def build_handlers(d: Daemon) -> dict[str, Callable[[dict[str, Any], Peer], Any]]:
    return {
        "ping": lambda p, peer: ping(d, p),
        "status": lambda p, peer: status(d, p),
        "search": lambda p, peer: search(d, p, peer),
        "get": lambda p, peer: get(d, p, peer),
        "reindex": lambda p, peer: reindex(d, p),
        "context": lambda p, peer: context(d, p, peer),
    } | build_write_handlers(d)


def ping(d: Daemon, params: dict[str, Any]) -> dict[str, Any]:
    reject_unknown(params, set())
    return {"version": d.version, "uptime_s": round(time.monotonic() - d.started, 3), "pid": os.getpid()}


def status(d: Daemon, params: dict[str, Any]) -> dict[str, Any]:
    reject_unknown(params, set())
    return d.status()


def _query(params: dict[str, Any]) -> str:
    query = param(params, "query", str)
    if not query.strip():
        raise InvalidParams("param 'query' must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidParams(f"param 'query' is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query


def search(d: Daemon, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
    reject_unknown(params, {"query", "k", "mode", "path_prefix", "min_score", "explain", "namespace", SESSION_PARAM})
    query = _query(params)
    k = param(params, "k", int, d.cfg.search.k)
    if not 1 <= k <= 1000:
        raise InvalidParams(f"param 'k' must be in 1..1000, got {k}")
    mode = param(params, "mode", str, d.cfg.search.mode)
    if mode not in SEARCH_MODES:
        raise InvalidParams(f"param 'mode' must be one of {list(SEARCH_MODES)}, got {mode!r}")
    scope = namespace_scope(d, params, peer)
    if scope is None:
        return {"hits": [], "took_ms": 0.0, "mode": mode}
    min_score, explain = param(params, "min_score", float, None), param(params, "explain", bool, False)
    result = d.index.search(
        query, k=k, mode=mode, path_prefix=scope[0], exclude_prefixes=scope[1], min_score=min_score,
        explain=explain, query_vector=_query_vector(d, query) if mode != "keyword" else None,
    )
    d.log.debug("search.done", mode=mode, k=k, hits=len(result["hits"]), took_ms=round(result["took_ms"], 2))
    return result


def _query_vector(d: Daemon, query: str) -> Callable[[], Any] | None:
    """The query's embedding, started now on its own thread (see daemon/query_embedding.py)."""
    if d.query_embeddings is None:
        return None
    return d.query_embeddings.start(clean_query(query))  # what the searcher searches (indexer.querytext)


def context(d: Daemon, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
    """The best memories for ``query`` as one Markdown block within ``max_tokens`` model tokens."""
    from indexer.context import build_context

    reject_unknown(params, {"query", "max_tokens", "k", "path_prefix", "namespace", SESSION_PARAM})
    query = _query(params)
    budget = param(params, "max_tokens", int)
    if not 16 <= budget <= 100_000:
        raise InvalidParams(f"param 'max_tokens' must be in 16..100000, got {budget}")
    k = param(params, "k", int, 20)
    if not 1 <= k <= 200:
        raise InvalidParams(f"param 'k' must be in 1..200, got {k}")
    t0 = time.perf_counter()
    scope = namespace_scope(d, params, peer)
    found = d.index.search(query, k=k, path_prefix=scope[0], exclude_prefixes=scope[1],
                           query_vector=_query_vector(d, query)) if scope else {"hits": []}
    block = build_context(query, found["hits"], budget, d.index.embedder.count_tokens)
    return {**block, "max_tokens": budget, "took_ms": round((time.perf_counter() - t0) * 1000, 2)}


def get(d: Daemon, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
    """Lines of a file inside a root (read-only; nothing outside the roots is served)."""
    reject_unknown(params, {"path", "start_line", "end_line", SESSION_PARAM})
    raw = param(params, "path", str)
    start = param(params, "start_line", int, 1)
    end = param(params, "end_line", int, None)
    if start < 1 or (end is not None and end < start):
        raise InvalidParams(f"bad line range {start}-{end}: lines are 1-based and end >= start")
    cands = d.roots.root_of(raw)
    if not cands:
        raise RpcError(NOT_INDEXED, f"{raw} is not a file inside a memory root")
    root, rel = cands[0]
    check_read(d, params, peer, root, rel)
    path = root / rel
    if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
        raise RpcError(NOT_INDEXED, f"{raw} resolves outside its root")
    try:
        content = read_memory_file(path, root, d.cfg.watch.max_file_bytes)
    except FileSkipped as exc:
        raise RpcError(NOT_INDEXED, f"cannot read {raw}: {exc.reason}" + (f" ({exc.detail})" if exc.detail else "")) \
            from None
    lines = content.text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    end = min(end or len(lines), len(lines))
    return {"root": str(root), "path": rel, "start_line": start, "end_line": end, "total_lines": len(lines),
            "text": "".join(x + "\n" for x in lines[start - 1 : end])}


def reindex(d: Daemon, params: dict[str, Any]) -> dict[str, Any]:
    """Queue (or run and wait for) a re-index of paths, or of everything."""
    reject_unknown(params, {"paths", "wait"})
    wait = param(params, "wait", bool, False)
    paths = param(params, "paths", list, None)
    t0 = time.monotonic()
    if paths is None:
        task = d.worker.request_reconcile("reindex request")
    else:
        files, unknown = _files_for(d, paths)
        if unknown:
            raise InvalidParams(f"not inside any memory root: {', '.join(unknown[:5])}")
        task = d.worker.index_now(files)
    if not wait:
        return {"queued": 1 if paths is None else len(paths), "done": False}
    assert task.done is not None
    if not task.done.wait(REINDEX_WAIT_S):
        raise RpcError(TIMEOUT, f"re-index still running after {REINDEX_WAIT_S:.0f} s; it goes on in the background")
    task.raise_if_cancelled()
    if "error" in task.result:
        raise RpcError(-32000, task.result["error"])
    return {"done": True, "took_ms": round((time.monotonic() - t0) * 1000, 1), **task.result}


def _files_for(d: Daemon, paths: list[Any]) -> tuple[list[tuple[Path, str]], list[str]]:
    files: list[tuple[Path, str]] = []
    unknown: list[str] = []
    for p in paths:
        if not isinstance(p, str) or not p:
            raise InvalidParams("param 'paths' must be a list of non-empty strings")
        loc = d.roots.locate(p) if os.path.isabs(p) else None
        cands = [loc] if loc else d.roots.root_of(p)
        if not cands:
            unknown.append(p)
            continue
        for root, rel in cands:
            if (root / rel).is_dir():
                files += [(root, f"{rel}/{sub}") for sub in _md_under(d, root / rel)]
            else:
                files.append((root, rel))
    return files, unknown


def _md_under(d: Daemon, directory: Path) -> list[str]:
    from indexer.files import walk_root

    return [rel for rel, _ in walk_root(directory, d.path_filter, d.path_filter.accept_dir)]
