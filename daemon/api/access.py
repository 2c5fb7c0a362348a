"""Seed 003's matrix for the read methods (``search``, ``context``, ``get``).

A direct peer reads only ``peers/ID/`` and a group only ``groups/ID/`` of the
first root; the owner (the default for the daemon's own uid) reads
everything. The rules themselves live in :mod:`memoryd.indexer.write.access`, and every
path is resolved by :mod:`memoryd.indexer.pathguard` (symlinks followed, ``..``
refused) before they are applied; these helpers turn them into the socket's
errors (-32020 denied, -32024 malformed path, see :mod:`memoryd.daemon.api.write`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.daemon.api.write import ACCESS_DENIED, BAD_TARGET, session_for
from memoryd.daemon.rpc.jsonrpc import InvalidParams, Peer, RpcError, param
from memoryd.indexer.pathguard import PathRefused, Resolved
from memoryd.indexer.write.access import (
    NAMESPACE_FOLDERS,
    OWNER,
    can_read,
    parse_namespace,
    read_refusal,
    scoped_prefix,
)
from memoryd.indexer.write.errors import AccessDenied, BadTarget

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

SESSION_PARAM = "session"


def search_prefix(d: Daemon, params: dict[str, Any], peer: Peer) -> str | None:
    """The ``path_prefix`` to search with: the request's own, confined to the session's folder."""
    session = session_for(params, peer)
    try:
        return scoped_prefix(session, d.roots.roots[0], param(params, "path_prefix", str, None))
    except PathRefused as exc:
        raise RpcError(BAD_TARGET, str(exc)) from None
    except AccessDenied as exc:
        raise RpcError(ACCESS_DENIED, str(exc)) from None


def path_check(d: Daemon, params: dict[str, Any], peer: Peer) -> Callable[[str, str], bool] | None:
    """For a confined session, a test of each indexed ``(root, rel)`` a search may return: the file
    must *resolve* inside the session's namespace (no link into another one). None for the owner."""
    session = session_for(params, peer)
    if session.kind == OWNER:
        return None
    guard, first = d.roots.guard, d.roots.roots[0]
    folders: dict[str, str] = {}  # resolved folders, for this request only
    roots: dict[str, Path] = {}

    def check(root: str, rel: str) -> bool:
        base = roots.setdefault(root, Path(root))
        return read_refusal(session, first, guard.resolve(base, rel, folders)) is None

    return check


def resolve_for_read(d: Daemon, params: dict[str, Any], peer: Peer, raw: str) -> Resolved | None:
    """The file a ``get`` names, resolved and checked against the session. None: no root holds it.

    Raises ``RpcError``: -32024 for a malformed path, -32020 when the session may not read it.
    A resolved path outside every root comes back with ``real_root`` None (the caller's -32010).
    """
    session = session_for(params, peer)
    try:
        cands = d.roots.guard.candidates(raw)
    except PathRefused as exc:
        raise RpcError(BAD_TARGET, str(exc)) from None
    if not cands:
        first = d.roots.roots[0]
        if session.kind != OWNER and (raw.startswith("/") or not can_read(session, first, first, raw)):
            # the same answer as for a file that exists there: a confined session learns nothing
            raise RpcError(ACCESS_DENIED, f"a {session.kind} session may not read {raw[:200]}")
        return None
    resolved = d.roots.guard.resolve(*cands[0])
    if session.kind != OWNER:
        why = read_refusal(session, d.roots.roots[0], resolved)
        if why is not None:
            raise RpcError(ACCESS_DENIED, why)
    return resolved


def namespace_scope(d: Daemon, params: dict[str, Any], peer: Peer) -> tuple[str | None, tuple[str, ...]] | None:
    """``(path_prefix, exclude_prefixes)`` for a read confined to the session and the ``namespace`` param.

    ``namespace`` is ``default``, ``agent:ID``, ``peer:ID`` or ``group:ID``; the default
    namespace is everything outside the agents/peers/groups folders. None means the
    namespace lies outside what the session may read: the answer is no hits.
    """
    prefix = search_prefix(d, params, peer)
    raw = param(params, "namespace", str, None)
    if raw is None:
        return prefix, ()
    try:
        ns = parse_namespace(raw, session_for(params, peer))
    except (AccessDenied, BadTarget) as exc:
        raise InvalidParams(str(exc)) from None
    if ns.kind == "default":
        return prefix, tuple(f"{folder}/" for folder in NAMESPACE_FOLDERS.values())
    ns_prefix = f"{Path(os.path.abspath(d.roots.roots[0])) / ns.folder}/"
    if prefix is None or ns_prefix.startswith(prefix):
        return ns_prefix, ()
    if prefix.startswith(ns_prefix):
        return prefix, ()
    return None
