"""The read side of the access rules (``search``, ``context``, ``get``).

A direct peer reads only ``peers/ID/`` and a group only ``groups/ID/`` of the
first root; the owner (the default for the daemon's own uid) reads
everything. The rules themselves live in :mod:`memoryd.indexer.access`, and every
path is resolved by :mod:`memoryd.indexer.pathguard` (symlinks followed, ``..``
refused) before they are applied; these helpers turn them into the socket's
errors (-32020 denied, -32024 malformed path: :mod:`memoryd.daemon.rpc.errors`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import ACCESS_DENIED, AMBIGUOUS_PATH, BAD_TARGET, RpcError
from memoryd.indexer.access import OWNER, Session, can_read, read_refusal
from memoryd.indexer.pathguard import PathRefused, Resolved


def path_check(session: Session, roots: RootMap) -> Callable[[str, str], bool] | None:
    """For a confined session, a test of each indexed ``(root, rel)`` a search may return: the file
    must *resolve* inside the session's namespace (no link into another one). None for the owner."""
    if session.kind == OWNER:
        return None
    guard, first = roots.guard, roots.roots[0]
    folders: dict[str, str] = {}  # resolved folders, for this request only
    bases: dict[str, Path] = {}

    def check(root: str, rel: str) -> bool:
        base = bases.setdefault(root, Path(root))
        return read_refusal(session, first, guard.resolve(base, rel, folders)) is None

    return check


def resolve_for_read(session: Session, roots: RootMap, raw: str) -> Resolved | None:
    """The file a ``get`` names, resolved and checked against the session. None: no root holds it.

    Raises ``RpcError``: -32024 for a malformed path, -32020 when the session may not read it,
    -32030 when a relative path names a file in several roots (the owner is told which; a confined
    session reads only inside its namespace, so for it the first root stands).
    A resolved path outside every root comes back with ``real_root`` None (the caller's -32010).
    """
    try:
        cands = roots.guard.candidates(raw)
    except PathRefused as exc:
        raise RpcError(BAD_TARGET, str(exc)) from None
    if not cands:
        first = roots.roots[0]
        if session.kind != OWNER and (raw.startswith("/") or not can_read(session, first, first, raw)):
            # the same answer as for a file that exists there: a confined session learns nothing
            raise RpcError(ACCESS_DENIED, f"a {session.kind} session may not read {raw[:200]}")
        return None
    if len(cands) > 1 and session.kind == OWNER:
        # Guessing the first root would serve a file the caller may not have meant (two MEMORY.md).
        names = [str(root / rel) for root, rel in cands]
        raise RpcError(AMBIGUOUS_PATH, f"{raw[:200]} is in {len(names)} memory roots: {', '.join(names)}; "
                       "name one by its absolute path", {"candidates": names})
    resolved = roots.guard.resolve(*cands[0])
    if session.kind != OWNER:
        why = read_refusal(session, roots.roots[0], resolved)
        if why is not None:
            raise RpcError(ACCESS_DENIED, why)
    return resolved
