"""``memoryd search --offline`` and ``memoryd context --offline`` with the daemon's read vocabulary.

The socket methods turn ``namespace`` and ``path_prefix`` into a scope
(:func:`memoryd.daemon.api.requests.read_scope`); the offline commands open the
index in-process (read-only, :func:`memoryd.daemon.oneshot.open_index`) and must
read the same files for the same flags, so they take the scope from the same
function, as the owner (a person's own command), then call the index's search
and, for ``context``, the same block builder the daemon uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.indexer.errors import MemorydError

if TYPE_CHECKING:
    from memoryd.indexer.config import Config


class OfflineParamsError(MemorydError):
    """A ``namespace`` or ``path_prefix`` the daemon would refuse (its message, without the RPC wrapping)."""


def scope_kwargs(cfg: Config, params: dict[str, Any]) -> dict[str, Any] | None:
    """``path_prefix`` and ``exclude_prefixes`` for ``index.search`` from the params' ``path_prefix`` and
    ``namespace`` (removed from ``params``); None when they select nothing."""
    from memoryd.daemon.api.requests import read_scope
    from memoryd.daemon.rpc.errors import RpcError
    from memoryd.indexer.access import OWNER, Session

    wanted: dict[str, Any] = {k: params.pop(k) for k in ("path_prefix", "namespace") if k in params}
    try:
        scope = read_scope(wanted, Session(OWNER), cfg.effective_roots[0])
    except RpcError as exc:
        raise OfflineParamsError(exc.message) from None
    if scope is None:
        return None
    return {"path_prefix": scope.path_prefix, "exclude_prefixes": scope.exclude_prefixes}


def _quiet_logs(cfg: Config) -> None:
    from memoryd.daemon.logs import configure_logging

    configure_logging(cfg.log.level if cfg.log.level in ("warning", "error") else "warning", cfg.log.format)


def offline_search(cfg: Config, params: dict[str, Any]) -> dict[str, Any]:
    """:func:`memoryd.daemon.oneshot.offline_search`, scoped as the daemon scopes a ``search``."""
    from memoryd.daemon.oneshot import offline_search as search

    params = dict(params)
    scope = scope_kwargs(cfg, params)
    if scope is None:
        return {"hits": [], "took_ms": 0.0, "mode": params.get("mode", cfg.search.mode)}
    return search(cfg, {**params, **scope})


def offline_context(cfg: Config, params: dict[str, Any]) -> dict[str, Any]:
    """The ``context`` block built in-process: the daemon's search, threshold and builder (keyword-ranked
    excerpt lines: the line-vector cache is the daemon's)."""
    import time

    from memoryd.daemon.oneshot import open_index
    from memoryd.indexer.search.context import build_context

    t0 = time.perf_counter()
    params = dict(params)
    scope = scope_kwargs(cfg, params)
    _quiet_logs(cfg)
    index = open_index(cfg, read_only=True)
    try:
        query, budget = params["query"], params["max_tokens"]
        found = None if scope is None else index.search(
            query, k=params.get("k", 20), mode=params.get("mode", cfg.search.mode),
            min_score=params.get("min_score", cfg.search.min_score), **scope)
        block = build_context(query, found.hits if found is not None else [], budget, index.embedder.count_tokens)
    finally:
        index.close()
    if found is not None and found.abstained:
        block = block.abstaining(found.reason)
    return {**block.to_json(), "max_tokens": budget, "took_ms": round((time.perf_counter() - t0) * 1000, 2)}
