"""Each socket method's params, parsed once at the edge into a typed request.

A parser checks the params in the order the method always has (so the first
bad one is the one named), resolves the session, and for reads the scope the
session may search; the handlers then work on plain typed values. Parsers need
no daemon: the search defaults and the first memory root are passed in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.daemon.api.session import SessionClaim
from memoryd.daemon.api.vocabulary import (
    AuditParams,
    ContextParams,
    ForgetParams,
    GetParams,
    HistoryParams,
    NoParams,
    RecordParams,
    ReindexParams,
    RememberParams,
    SearchParams,
    param_names,
)
from memoryd.daemon.rpc.errors import ACCESS_DENIED, BAD_TARGET, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Peer, param, reject_unknown
from memoryd.indexer.access import NAMESPACE_FOLDERS, Session, parse_namespace, scoped_prefix
from memoryd.indexer.config import SEARCH_MODES, SearchConfig, SearchMode, is_search_mode
from memoryd.indexer.errors import AccessDenied, BadTarget
from memoryd.indexer.pathguard import PathRefused
from memoryd.indexer.search.query import Query
from memoryd.indexer.write.router import TYPES

MAX_QUERY_CHARS = 8192
MAX_AUDIT_TAIL = 10_000
MAX_HISTORY_LIMIT = 1000
_ID_MAX = 64

Params = dict[str, Any]


@dataclass(frozen=True)
class Scope:
    """Where a read may look: ``path_prefix`` (None = everywhere) minus ``exclude_prefixes``."""

    path_prefix: str | None
    exclude_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int
    mode: SearchMode
    session: Session
    scope: Scope | None  # None: the namespace lies outside what the session may read (no hits)
    min_score: float | None = None
    explain: bool = False
    sites: tuple[str, ...] | None = None  # PostgreSQL backend: only these sites' files ("self": this daemon's)

    def to_query(self, *, path_check: PathCheck | None = None, query_vector: PendingVector | None = None,
                 sites: tuple[str, ...] | None = None) -> Query:
        """The :class:`Query` this request asks for, built in one place for the socket and ``--offline``
        alike. The handler adds what parsing cannot know: the session's per-file check, the query's
        embedding (started on another thread) and :attr:`sites` with ``"self"`` resolved."""
        return _scoped(self.query, self.k, self.mode, self.scope, self.min_score, path_check=path_check,
                       query_vector=query_vector, explain=self.explain, sites=sites)


@dataclass(frozen=True)
class ContextRequest:
    query: str
    max_tokens: int
    k: int
    session: Session
    scope: Scope | None
    min_score: float | None = None
    mode: SearchMode | None = None  # None: the configured search.mode

    def to_query(self, *, path_check: PathCheck | None = None, query_vector: PendingVector | None = None) -> Query:
        """The search a ``context`` block is built from (as :meth:`SearchRequest.to_query`)."""
        return _scoped(self.query, self.k, self.mode, self.scope, self.min_score, path_check=path_check,
                       query_vector=query_vector)


PathCheck = Callable[[str, str], bool]
PendingVector = Callable[[], Any]


def _scoped(text: str, k: int, mode: SearchMode | None, scope: Scope | None, min_score: float | None, *,
            path_check: PathCheck | None, query_vector: PendingVector | None, explain: bool = False,
            sites: tuple[str, ...] | None = None) -> Query:
    """A read's :class:`Query` inside its scope; a request whose scope is None selects nothing and is never
    run (its handler answers no hits), so asking for its query is a bug."""
    if scope is None:
        raise ValueError(f"the search for {text[:40]!r} has no scope: it selects nothing and must not run")
    return Query(text, k=k, mode=mode, path_prefix=scope.path_prefix, min_score=min_score, explain=explain,
                 exclude_prefixes=tuple(scope.exclude_prefixes), query_vector=query_vector, path_check=path_check,
                 sites=sites)


@dataclass(frozen=True)
class GetRequest:
    path: str
    start_line: int
    end_line: int | None
    session: Session
    site: str | None = None  # the search hit's site (PostgreSQL): another site's hit is refused, not read here


@dataclass(frozen=True)
class ReindexRequest:
    paths: tuple[str, ...] | None  # None: everything; each a non-empty string (checked when parsed)
    wait: bool


@dataclass(frozen=True)
class RememberRequest:
    content: str
    type: str | None
    namespace: str | None
    claim: SessionClaim
    explain: bool = False  # the reply says why: the entry compared, its cosine, the subject, the slot, what differs


@dataclass(frozen=True)
class ForgetRequest:
    path: str
    line: int
    text: str | None
    claim: SessionClaim
    site: str | None = None  # as GetRequest.site


@dataclass(frozen=True)
class AuditRequest:
    tail: int
    session: Session
    log: str = "writes"  # "writes" (audit.jsonl) or "reads" (audit-reads.jsonl)


@dataclass(frozen=True)
class HistoryRequest:
    path: str | None
    limit: int
    session: Session


@dataclass(frozen=True)
class UndoRequest:
    id: str
    claim: SessionClaim


def no_params(params: Params) -> None:
    """``ping`` and ``status`` take none."""
    reject_unknown(params, param_names(NoParams))


def _query(params: Params) -> str:
    query = param(params, "query", str)
    if not query.strip():
        raise InvalidParams("param 'query' must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidParams(f"param 'query' is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query


def parse_search(params: Params, peer: Peer, defaults: SearchConfig, first_root: Path) -> SearchRequest:
    reject_unknown(params, param_names(SearchParams))
    query = _query(params)
    k = param(params, "k", int, defaults.k)
    if not 1 <= k <= 1000:
        raise InvalidParams(f"param 'k' must be in 1..1000, got {k}")
    mode = param(params, "mode", str, defaults.mode)
    if not is_search_mode(mode):
        raise InvalidParams(f"param 'mode' must be one of {list(SEARCH_MODES)}, got {mode!r}")
    session = SessionClaim.of(params, peer).resolve()
    scope = read_scope(params, session, first_root)
    if scope is None:  # no hits whatever the rest says
        return SearchRequest(query, k, mode, session, None)
    min_score, explain = min_score_of(params, None, defaults.min_score), param(params, "explain", bool, False)
    return SearchRequest(query, k, mode, session, scope, min_score, explain, _sites(params))


def _sites(params: Params) -> tuple[str, ...] | None:
    """The ``sites`` param: a non-empty list of site ids (``"self"``: the answering daemon's), or absent (all)."""
    raw = param(params, "sites", list, None)
    if raw is None:
        return None
    if not raw or not all(isinstance(s, str) and s for s in raw):
        raise InvalidParams(f"param 'sites' must be a non-empty list of site ids, got {raw!r:.200}")
    if not all(s.isprintable() and len(s) <= 1024 for s in raw):  # NUL or a control character: no site has one
        raise InvalidParams("param 'sites' must hold printable site ids of at most 1024 characters")
    return tuple(raw)


def min_score_of(params: Params, absent: float | None, configured: float) -> float | None:
    """The abstention threshold asked for: a number in 0..1, ``"default"`` for the configured
    ``search.min_score`` (what the MCP tools send), or ``absent`` when the param is not given."""
    value = params.get("min_score")
    if value == "default":
        return configured
    score = param(params, "min_score", float, absent)
    if score is not None and not 0.0 <= score <= 1.0:
        raise InvalidParams(f"param 'min_score' must be in 0..1 or \"default\", got {score}")
    return score


def parse_context(params: Params, peer: Peer, first_root: Path, min_score: float = 0.0) -> ContextRequest:
    """``min_score`` is the configured threshold, used when the params name none."""
    reject_unknown(params, param_names(ContextParams))
    query = _query(params)
    mode = param(params, "mode", str, None)
    if mode is not None and not is_search_mode(mode):
        raise InvalidParams(f"param 'mode' must be one of {list(SEARCH_MODES)}, got {mode[:40]!r}")
    budget = param(params, "max_tokens", int)
    if not 16 <= budget <= 100_000:
        raise InvalidParams(f"param 'max_tokens' must be in 16..100000, got {budget}")
    k = param(params, "k", int, 20)
    if not 1 <= k <= 200:
        raise InvalidParams(f"param 'k' must be in 1..200, got {k}")
    threshold = min_score_of(params, min_score, min_score)
    session = SessionClaim.of(params, peer).resolve()
    return ContextRequest(query, budget, k, session, read_scope(params, session, first_root), threshold,
                          mode)


def parse_get(params: Params, peer: Peer) -> GetRequest:
    reject_unknown(params, param_names(GetParams))
    raw = param(params, "path", str)
    start = param(params, "start_line", int, 1)
    end = param(params, "end_line", int, None)
    if start < 1 or (end is not None and end < start):
        raise InvalidParams(f"bad line range {start}-{end}: lines are 1-based and end >= start")
    return GetRequest(raw, start, end, SessionClaim.of(params, peer).resolve(), param(params, "site", str, None))


def parse_reindex(params: Params) -> ReindexRequest:
    reject_unknown(params, param_names(ReindexParams))
    wait = param(params, "wait", bool, False)
    paths = param(params, "paths", list, None)
    if paths is not None and not all(isinstance(p, str) and p for p in paths):
        raise InvalidParams("param 'paths' must be a list of non-empty strings")
    return ReindexRequest(None if paths is None else tuple(paths), wait)


def parse_remember(params: Params, peer: Peer) -> RememberRequest:
    reject_unknown(params, param_names(RememberParams))
    content = param(params, "content", str)
    mtype = param(params, "type", str, None)
    ns_raw = param(params, "namespace", str, None)
    if mtype is not None and mtype not in TYPES:
        raise InvalidParams(f"param 'type' must be one of {list(TYPES)}, got {mtype[:40]!r}")
    explain = param(params, "explain", bool, False)
    return RememberRequest(content, mtype, ns_raw, SessionClaim.of(params, peer), explain)


def parse_forget(params: Params, peer: Peer) -> ForgetRequest:
    reject_unknown(params, param_names(ForgetParams))
    raw = param(params, "path", str)
    line = param(params, "line", int)
    expect = param(params, "text", str, None)
    if line < 1:
        raise InvalidParams(f"param 'line' must be >= 1, got {line}")
    return ForgetRequest(raw, line, expect, SessionClaim.of(params, peer), param(params, "site", str, None))


def parse_audit(params: Params, peer: Peer) -> AuditRequest:
    reject_unknown(params, param_names(AuditParams))
    n = param(params, "tail", int, 20)
    if not 1 <= n <= MAX_AUDIT_TAIL:
        raise InvalidParams(f"param 'tail' must be in 1..{MAX_AUDIT_TAIL}, got {n}")
    which = param(params, "log", str, "writes")
    if which not in ("writes", "reads"):
        raise InvalidParams(f"param 'log' must be 'writes' or 'reads', got {which[:40]!r}")
    return AuditRequest(n, SessionClaim.of(params, peer).resolve(), which)


def parse_history(params: Params, peer: Peer) -> HistoryRequest:
    reject_unknown(params, param_names(HistoryParams))
    path = param(params, "path", str, None)
    limit = param(params, "limit", int, 50)
    if not 1 <= limit <= MAX_HISTORY_LIMIT:
        raise InvalidParams(f"param 'limit' must be in 1..{MAX_HISTORY_LIMIT}, got {limit}")
    if path is not None and ("\x00" in path or len(path) > 4096):
        raise InvalidParams("param 'path' must be a path without NUL, at most 4096 characters")
    return HistoryRequest(path, limit, SessionClaim.of(params, peer).resolve())


def parse_undo(params: Params, peer: Peer) -> UndoRequest:
    reject_unknown(params, param_names(RecordParams))
    rid = param(params, "id", str)
    if not rid or len(rid) > _ID_MAX:
        raise InvalidParams(f"param 'id' must be a history id (1..{_ID_MAX} characters)")
    return UndoRequest(rid, SessionClaim.of(params, peer))


def read_scope(params: Params, session: Session, first_root: Path) -> Scope | None:
    """The scope of a read confined to the session, its ``path_prefix`` and its ``namespace`` param.

    ``namespace`` is ``default``, ``agent:ID``, ``peer:ID`` or ``group:ID``; the default
    namespace is everything outside the agents/peers/groups folders. None means the
    namespace lies outside what the session may read: the answer is no hits.
    """
    try:
        prefix = scoped_prefix(session, first_root, param(params, "path_prefix", str, None))
    except PathRefused as exc:
        raise RpcError(BAD_TARGET, str(exc)) from None
    except AccessDenied as exc:
        raise RpcError(ACCESS_DENIED, str(exc)) from None
    raw = param(params, "namespace", str, None)
    if raw is None:
        return Scope(prefix)
    try:
        ns = parse_namespace(raw, session)
    except (AccessDenied, BadTarget) as exc:
        raise InvalidParams(str(exc)) from None
    if ns.kind == "default":
        return Scope(prefix, tuple(f"{folder}/" for folder in NAMESPACE_FOLDERS.values()))
    ns_prefix = f"{Path(os.path.abspath(first_root)) / ns.folder}/"
    if prefix is None or ns_prefix.startswith(prefix):
        return Scope(ns_prefix)
    if prefix.startswith(ns_prefix):
        return Scope(prefix)
    return None
