"""Seed 003's matrix for the read methods (``search``, ``context``, ``get``).

A direct peer reads only ``peers/ID/`` and a group only ``groups/ID/`` of the
first root; the owner (the default for the daemon's own uid) reads
everything. The rules themselves live in :mod:`indexer.write.access`; these
helpers turn them into the socket's errors (-32020, see
:mod:`daemon.write_methods`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.jsonrpc import InvalidParams, Peer, RpcError, param
from daemon.write_methods import ACCESS_DENIED, session_for
from indexer.write.access import NAMESPACE_FOLDERS, can_read, parse_namespace, scoped_prefix
from indexer.write.errors import AccessDenied, BadTarget

if TYPE_CHECKING:
    from daemon.app import Daemon

SESSION_PARAM = "session"


def search_prefix(d: Daemon, params: dict[str, Any], peer: Peer) -> str | None:
    """The ``path_prefix`` to search with: the request's own, confined to the session's folder."""
    session = session_for(params, peer)
    try:
        return scoped_prefix(session, d.roots.roots[0], param(params, "path_prefix", str, None))
    except AccessDenied as exc:
        raise RpcError(ACCESS_DENIED, str(exc)) from None


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


def check_read(d: Daemon, params: dict[str, Any], peer: Peer, root: Path, rel: str) -> None:
    """Raise ``RpcError(ACCESS_DENIED)`` unless the request's session may read ``rel`` under ``root``."""
    session = session_for(params, peer)
    if not can_read(session, d.roots.roots[0], root, rel):
        raise RpcError(ACCESS_DENIED, f"a {session.kind} session may not read {rel}")
