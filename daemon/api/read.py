"""The read socket methods: ``search``, ``context``, ``get`` and ``reindex``.

Each handler parses its params into a typed request
(:mod:`memoryd.daemon.api.requests`), then calls the index or the worker.
Handlers run on the server's connection threads; the index's lock makes
searches safe beside the worker. The parts come from :mod:`memoryd.daemon.app`:
the search index, the roots (replaced on a config reload, hence a getter), the
worker, the search defaults, the path filter and the query embedder.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import structlog

from memoryd.daemon.api import path_redaction as shown_paths
from memoryd.daemon.api.access import path_check, resolve_for_read
from memoryd.daemon.api.file_abstracts import FileAbstracts
from memoryd.daemon.api.ports import SearchIndex, WorkQueue, worker_result
from memoryd.daemon.api.redaction import redacts, text_for
from memoryd.daemon.api.requests import (
    ContextRequest,
    SearchRequest,
    parse_context,
    parse_get,
    parse_reindex,
    parse_search,
)
from memoryd.daemon.api.vocabulary import ContextReply, GetReply, SearchReply
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import APPLICATION_ERROR, BAD_TARGET, NOT_INDEXED, TIMEOUT, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer, param
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.indexer.config import SearchConfig
from memoryd.indexer.errors import FileSkipped, MemorydError, ProviderUnavailable
from memoryd.indexer.ingestion.files import read_memory_file, walk_root
from memoryd.indexer.pathguard import PathRefused
from memoryd.indexer.search.querytext import clean_query
from memoryd.indexer.storage.base import StorageUnavailableError
from memoryd.indexer.storage.site import foreign_site
from memoryd.indexer.types import Embedder

if TYPE_CHECKING:
    from memoryd.daemon.work.line_vectors import LineCache, LineVectors
    from memoryd.indexer.llm.port import JsonModel
    from memoryd.indexer.search.abstracts import AbstractStore
    from memoryd.indexer.search.context import LineScorer

REINDEX_WAIT_S = 300.0
DEGRADED_CONFINED = "keyword results only: embedding server unavailable"  # what a confined session is told

log = structlog.get_logger("memoryd")

#: A query → a callable that waits for its embedding (started at once), or None (the searcher embeds it).
QueryVector = Callable[[str], Callable[[], Any] | None]


def query_vector_of(embeddings: QueryEmbeddings | None) -> QueryVector:
    """Start each query's embedding on its own thread (see :mod:`memoryd.daemon.work.query_embedding`)."""
    if embeddings is None:
        return lambda query: None
    start = embeddings.start
    return lambda query: start(clean_query(query))  # what the searcher searches (memoryd.indexer.search.querytext)


class ReadMethods:
    def __init__(
        self, *, index: SearchIndex, roots: Callable[[], RootMap], worker: WorkQueue, search: SearchConfig,
        path_filter: PathFilter, max_file_bytes: int, count_tokens: Callable[[list[str]], list[int]],
        query_vector: QueryVector, embedder: Embedder | None = None, line_cache: LineCache | None = None,
        redact_level: str = "secrets", model: Callable[[], JsonModel | None] = lambda: None,
        abstracts: AbstractStore | None = None,
    ) -> None:
        self._index = index
        self._roots = roots
        self._worker = worker
        self._defaults = search
        self._filter = path_filter
        self._max_file_bytes = max_file_bytes
        self._count_tokens = count_tokens
        self._query_vector = query_vector
        self._redact_level = redact_level  # write.redact_index: what a confined session's get hides, as search does
        self._model = model  # the [llm] client, if any: context summarizes what does not fit (summaries.py)
        self._abstracts = FileAbstracts(abstracts, model, max_file_bytes, redact_level)  # made at idle time
        # context excerpts: lines ranked by the model (None, or search.context_line_model off: by matched lines)
        self._embedder = embedder if search.context_line_model else None
        self._line_vectors = _line_vectors(self._embedder, line_cache) if self._embedder is not None else None

    def handlers(self) -> dict[str, Handler]:
        return {"search": self.search, "get": self.get, "reindex": self.reindex, "context": self.context}

    def search(self, params: dict[str, Any], peer: Peer) -> SearchReply:
        req = parse_search(params, peer, self._defaults, self._roots().roots[0])
        return self.run_search(req)

    def run_search(self, req: SearchRequest) -> SearchReply:
        if req.scope is None:
            return {"hits": [], "took_ms": 0.0, "mode": req.mode}
        result = self._index.query(req.to_query(
            path_check=path_check(req.session, self._roots()),
            query_vector=self._query_vector(req.query) if req.mode != "keyword" else None,
            sites=self._sites(req.sites),
        ))
        log.debug("search.done", mode=req.mode, k=req.k, hits=len(result.hits), took_ms=round(result.took_ms, 2))
        out = cast(SearchReply, shown_paths.hits(result.to_json()))  # SearchResult.to_json: that shape
        if "degraded" in out and redacts(req.session):  # the server's own words are the owner's to read
            out["degraded"] = DEGRADED_CONFINED
        roots = len(self._roots().roots)
        if roots > 1:  # a bare relative path is then ambiguous: clients show each hit's root
            out["roots"] = roots
        return out

    def _sites(self, sites: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The sites asked for on a backend with sites (PostgreSQL), ``"self"`` resolved; None when not asked."""
        if sites is None:
            return None
        mine = self._index.site
        if mine is None:
            raise InvalidParams("param 'sites' needs storage.backend = 'postgres' (the embedded index has one site)")
        return tuple(mine if s == "self" else s for s in sites)

    def context(self, params: dict[str, Any], peer: Peer) -> ContextReply:
        """The best memories for ``query`` as one Markdown block within ``max_tokens`` model tokens."""
        t0 = time.perf_counter()
        return self.run_context(parse_context(params, peer, self._roots().roots[0], self._defaults.min_score), t0)

    def run_context(self, req: ContextRequest, t0: float) -> ContextReply:
        from memoryd.indexer.search.context import build_context

        scope = req.scope
        vector = self._query_vector(req.query) if req.mode != "keyword" else None
        found = self._index.query(req.to_query(
            path_check=path_check(req.session, self._roots()), query_vector=vector)) if scope else None
        hits = found.hits if found is not None else []
        chunk_ids = [i for h in hits for i in (h.chunk_id, *h.absorbed)]
        scorer = self._line_scorer(req.query, vector, chunk_ids) if hits else None
        model = self._model() if hits else None
        if model is not None:  # what does not fit is summarized (any failure: build_context's block)
            from memoryd.indexer.search.summaries import compact_context

            block = compact_context(req.query, hits, req.max_tokens, self._count_tokens, model, scorer,
                                    self._abstract_of(model))
        else:
            block = build_context(req.query, hits, req.max_tokens, self._count_tokens, scorer)
        if found is not None and found.abstained:  # nothing confident: say so rather than hand back noise
            block = block.abstaining(found.reason)
        reply = cast(ContextReply, shown_paths.context(block.to_json()))  # ContextBlock.to_json: that shape
        reply["max_tokens"] = req.max_tokens
        reply["took_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return reply

    def _abstract_of(self, model: JsonModel) -> Callable[[str, str], str | None] | None:
        """A file's cached abstract by ``(root, path)`` (its text read now, so an edited file misses)."""
        abstracts = self._abstracts
        if abstracts.state == "off":
            return None
        return lambda root, rel: abstracts.of_file(Path(root), rel)

    def _line_scorer(self, query: str, vector: Callable[[], Any] | None,
                     chunk_ids: Sequence[int]) -> LineScorer | None:
        """Excerpt lines scored against the query's vector — the one the search used, or the model's —
        with the line vectors the index filled in for the hits' chunks, read at the first lines to
        score (most blocks fit whole and score none)."""
        from memoryd.indexer.search.context import cosine_scorer

        line_vectors = self._line_vectors
        if self._embedder is None or line_vectors is None:
            return None
        try:
            qvec = vector() if vector is not None else self._embedder.embed_query(clean_query(query))
        except ProviderUnavailable:  # the embedding server is down: lines in matched order, as without the model
            return None
        loaded: list[bool] = []

        def embed(lines: list[str]) -> Any:
            if not loaded:
                loaded.append(True)
                line_vectors.preload(chunk_ids)
            try:
                return line_vectors(lines)
            except ProviderUnavailable:  # down since the query's vector: all tie, the matched order stays
                return [[0.0] * len(qvec) for _ in lines]

        return cosine_scorer(embed, qvec)

    def get(self, params: dict[str, Any], peer: Peer) -> GetReply:
        """Lines of a file inside a root (read-only; nothing outside the roots is served).

        The path is resolved first (:func:`memoryd.daemon.api.access.resolve_for_read`): access is decided on
        where it leads, and the resolved file is what is read.
        """
        req = parse_get(params, peer)
        refusal = foreign_site(req.site, self._index.site)
        if refusal is not None:
            raise InvalidParams(refusal)
        raw = req.path
        resolved = resolve_for_read(req.session, self._roots(), raw)
        if resolved is None:
            raise RpcError(NOT_INDEXED, f"{raw} is not a file inside a memory root")
        if resolved.real_root is None:
            raise RpcError(NOT_INDEXED, f"{raw} resolves outside every memory root")
        try:
            content = read_memory_file(resolved.real_path, resolved.real_root, self._max_file_bytes)
        except FileSkipped as exc:
            detail = f" ({exc.detail})" if exc.detail else ""
            raise RpcError(NOT_INDEXED, f"cannot read {raw}: {exc.reason}{detail}") from None
        lines = text_for(req.session, content.text, self._redact_level).split("\n")  # confined: as search redacts
        if lines and lines[-1] == "":
            lines.pop()
        start = req.start_line
        if start > max(len(lines), 1):  # past the end: a usage error, not an empty answer (an END past it is cut)
            raise InvalidParams(f"line {start} is past the end of {resolved.rel} ({len(lines)} lines)")
        end = min(req.end_line or len(lines), len(lines))
        reply: GetReply = {"root": str(resolved.root), "path": resolved.rel, "start_line": start, "end_line": end,
                           "total_lines": len(lines), "text": "".join(x + "\n" for x in lines[start - 1 : end])}
        if param(params, "abstract", bool, False):  # asked for: it reads and redacts the whole file
            reply["abstracts"] = self._abstracts.state
            reply["abstract"] = self._abstracts.of_text(content.text)
        return reply

    def reindex(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """Queue (or run and wait for) a re-index of paths, or of everything."""
        req = parse_reindex(params)
        t0 = time.monotonic()
        task: Future[dict[str, Any]]
        if req.paths is None:
            task = self._worker.request_reconcile("reindex request")
        else:
            files, unknown, refused = self._files_for(req.paths)
            if unknown:
                raise InvalidParams(f"not inside any memory root: {', '.join(unknown[:5])}")
            task = self._worker.index_now(files)
        # Each path named that will not be indexed, with why: "queued 1 paths" for a typo'd name misled.
        named = {} if req.paths is None else {"not_indexed": refused}
        if not req.wait:
            return {"queued": 1 if req.paths is None else len(files), "done": False, **named}
        try:
            stats = worker_result(task, REINDEX_WAIT_S)
        except TimeoutError:
            raise RpcError(TIMEOUT, f"re-index still running after {REINDEX_WAIT_S:.0f} s; "
                           "it goes on in the background") from None
        except StorageUnavailableError:
            raise  # its own code (-32031)
        except MemorydError as exc:
            raise RpcError(APPLICATION_ERROR, str(exc)) from None
        if named:  # the engine's skips (too large, binary ...) with their reasons, after the ones known up front
            named["not_indexed"] = refused + [{"path": path, "reason": reason}
                                              for path, reason in stats.pop("skipped_files", {}).items()]
        return {"done": True, "took_ms": round((time.monotonic() - t0) * 1000, 1), **stats, **named}

    def _files_for(self, paths: tuple[str, ...]) -> tuple[list[tuple[Path, str]], list[str], list[dict[str, str]]]:
        """(root, rel) of every file to index for ``paths``; the paths that lie outside every root; and
        the paths inside a root that will not be indexed, each with its reason.

        A missing file is still queued (its chunks, if any, are removed) but named as missing; a file
        the path filter refuses (``watch.include``/``watch.exclude``) is not queued.

        Each path goes through the resolver: malformed ones (NUL, ``..``, over-long) are refused with
        -32024; a folder is walked at its resolved place (and only if that is inside a root); a file
        keeps its name with its folders resolved, as the walk of the roots names it.
        """
        guard = self._roots().guard
        files: list[tuple[Path, str]] = []
        unknown: list[str] = []
        refused: list[dict[str, str]] = []
        for p in paths:
            try:
                cands = guard.candidates(p, "param 'paths' entry")
            except PathRefused as exc:
                raise RpcError(BAD_TARGET, str(exc)) from None
            for root, rel in cands:
                r = guard.resolve(root, rel)
                loc = guard.resolve_parent(root, rel) if rel else None
                if r.is_dir and r.real_root is not None and r.real_rel is not None:
                    files += [(r.real_root, _join(r.real_rel, sub)) for sub in self._md_under(r.real_root, r.real_rel)]
                elif not r.is_dir and loc is not None and (r.real_root is not None or not r.exists):
                    if not self._filter(loc[1]):
                        refused.append({"path": p, "reason": "not a memory file: watch.include is "
                                        f"{', '.join(self._filter.include) or '(all)'}, watch.exclude is "
                                        f"{', '.join(self._filter.exclude) or '(none)'}"})
                        continue
                    if not r.exists:
                        refused.append({"path": p, "reason": "no such file"})
                    files.append(loc)
                else:
                    unknown.append(p)
            if not cands:
                unknown.append(p)
        return files, unknown, refused

    def _md_under(self, root: Path, folder: str) -> list[str]:
        """Accepted files under ``root/folder`` (relative to ``folder``), judged by the root-relative filter."""
        accept, accept_dir = self._filter, self._filter.accept_dir
        return [rel for rel, _ in walk_root(root / folder if folder else root, lambda sub: accept(_join(folder, sub)),
                                            lambda sub: accept_dir(_join(folder, sub)))]


def _line_vectors(embedder: Embedder, line_cache: LineCache | None) -> LineVectors:
    """The context lines' vectors, kept (imported here: they hold numpy arrays, which the handlers
    and their tests otherwise never load)."""
    from memoryd.daemon.work.line_vectors import LineVectors

    return LineVectors(embedder.embed_passages, store=line_cache)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name
