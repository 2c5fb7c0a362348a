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

from memoryd.daemon.api.access import SESSION_PARAM, namespace_scope, path_check, resolve_for_read
from memoryd.daemon.api.write import BAD_TARGET, build_write_handlers
from memoryd.daemon.rpc.jsonrpc import InvalidParams, Peer, RpcError, param, reject_unknown
from memoryd.indexer.config import SEARCH_MODES
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.files import read_memory_file
from memoryd.indexer.pathguard import PathRefused
from memoryd.indexer.querytext import clean_query

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

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
        explain=explain, path_check=path_check(d, params, peer),
        query_vector=_query_vector(d, query) if mode != "keyword" else None,
    )
    d.log.debug("search.done", mode=mode, k=k, hits=len(result["hits"]), took_ms=round(result["took_ms"], 2))
    return result


def _query_vector(d: Daemon, query: str) -> Callable[[], Any] | None:
    """The query's embedding, started now on its own thread (see daemon/work/query_embedding.py)."""
    if d.query_embeddings is None:
        return None
    return d.query_embeddings.start(clean_query(query))  # what the searcher searches (memoryd.indexer.querytext)


def context(d: Daemon, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
    """The best memories for ``query`` as one Markdown block within ``max_tokens`` model tokens."""
    from memoryd.indexer.context import build_context

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
                           path_check=path_check(d, params, peer),
                           query_vector=_query_vector(d, query)) if scope else {"hits": []}
    block = build_context(query, found["hits"], budget, d.index.embedder.count_tokens)
    return {**block, "max_tokens": budget, "took_ms": round((time.perf_counter() - t0) * 1000, 2)}


def get(d: Daemon, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
    """Lines of a file inside a root (read-only; nothing outside the roots is served).

    The path is resolved first (:func:`memoryd.daemon.api.access.resolve_for_read`): access is decided on
    where it leads, and the resolved file is what is read.
    """
    reject_unknown(params, {"path", "start_line", "end_line", SESSION_PARAM})
    raw = param(params, "path", str)
    start = param(params, "start_line", int, 1)
    end = param(params, "end_line", int, None)
    if start < 1 or (end is not None and end < start):
        raise InvalidParams(f"bad line range {start}-{end}: lines are 1-based and end >= start")
    resolved = resolve_for_read(d, params, peer, raw)
    if resolved is None:
        raise RpcError(NOT_INDEXED, f"{raw} is not a file inside a memory root")
    if resolved.real_root is None:
        raise RpcError(NOT_INDEXED, f"{raw} resolves outside every memory root")
    root, rel = resolved.root, resolved.rel
    try:
        content = read_memory_file(resolved.real_path, resolved.real_root, d.cfg.watch.max_file_bytes)
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
    """(root, rel) of every file to index for ``paths``; and the paths that lie outside every root.

    Each path goes through the resolver: malformed ones (NUL, ``..``, over-long) are refused with
    -32024; a folder is walked at its resolved place (and only if that is inside a root); a file
    keeps its name with its folders resolved, as the walk of the roots names it.
    """
    guard = d.roots.guard
    files: list[tuple[Path, str]] = []
    unknown: list[str] = []
    for p in paths:
        if not isinstance(p, str) or not p:
            raise InvalidParams("param 'paths' must be a list of non-empty strings")
        try:
            cands = guard.candidates(p, "param 'paths' entry")
        except PathRefused as exc:
            raise RpcError(BAD_TARGET, str(exc)) from None
        for root, rel in cands:
            r = guard.resolve(root, rel)
            loc = guard.resolve_parent(root, rel) if rel else None
            if r.is_dir and r.real_root is not None and r.real_rel is not None:
                files += [(r.real_root, _join(r.real_rel, sub)) for sub in _md_under(d, r.real_root, r.real_rel)]
            elif not r.is_dir and loc is not None and (r.real_root is not None or not r.exists):
                files.append(loc)
            else:
                unknown.append(p)
        if not cands:
            unknown.append(p)
    return files, unknown


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _md_under(d: Daemon, root: Path, folder: str) -> list[str]:
    """Accepted files under ``root/folder`` (relative to ``folder``), judged by the root-relative filter."""
    from memoryd.indexer.files import walk_root

    accept, accept_dir = d.path_filter, d.path_filter.accept_dir
    return [rel for rel, _ in walk_root(root / folder if folder else root, lambda sub: accept(_join(folder, sub)),
                                        lambda sub: accept_dir(_join(folder, sub)))]
