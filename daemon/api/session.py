"""Who is asking: the ``session`` param of a request, checked against the peer's uid.

Every method that reads or writes memories names its session here (absent = the
owner, allowed only for the daemon's own uid). The rules a session obeys live in
:mod:`memoryd.indexer.access`; this module turns their refusals into the
socket's errors (:mod:`memoryd.daemon.rpc.errors`), and says who is held to the
write rate limits (:func:`held_to_limits`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import structlog

from memoryd.daemon.api.vocabulary import BOUND_METHODS
from memoryd.daemon.rpc.errors import ACCESS_DENIED, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.daemon.rpc.serving import Admission
from memoryd.indexer.access import OWNER, Session, binding_text, parse_binding, parse_session
from memoryd.indexer.errors import AccessDenied, DaemonError, SessionError

log = structlog.get_logger(__name__)

__all__ = ["BOUND_METHODS", "SESSION_PARAM", "SessionClaim", "admission", "bind_uids", "held_to_limits", "owner_only"]

SESSION_PARAM = "session"

# What a bound uid (``server.allowed_uids``) may call: the methods whose row in the vocabulary says
# ``bound`` (the confined reads and ``remember``), each still checked against its session by the
# handler. Everything else is the owner's, including methods added later (default deny).


@dataclass(frozen=True)
class SessionClaim:
    """The session a request claims, not yet checked: write methods check it inside their audit record."""

    raw: object
    owner_allowed: bool

    @classmethod
    def of(cls, params: dict[str, object], peer: Peer) -> SessionClaim:
        return cls(params.get(SESSION_PARAM), owner_allowed=peer.uid == os.getuid())

    def resolve(self) -> Session:
        """The session; raises ``InvalidParams`` (malformed) or ``RpcError(ACCESS_DENIED)``."""
        try:
            return parse_session(self.raw, owner_allowed=self.owner_allowed)
        except SessionError as exc:
            raise InvalidParams(str(exc)) from None
        except AccessDenied as exc:
            raise RpcError(ACCESS_DENIED, str(exc)) from None


def held_to_limits(session: Session) -> bool:
    """Whether a write of ``session`` counts against the rate limits (README, "Write limits").

    Agents are held to them; a person is not. Every confined session (``direct``, ``group``:
    an agent talking to others, or another uid) is an agent. An owner session is an agent's
    when it carries a ``turn`` id: a turn is an agent's notion, and ``memoryd mcp`` sends its
    turn with every write, so an owner MCP session is limited like any other agent and cannot
    opt out (it has no flag for it). An owner request without a turn is a person at the
    command line (``memoryd remember``, ``forget``, ``undo`` …): that uid may edit the memory
    files directly anyway, so a limit would protect nothing and only lock a person cleaning up
    out for a minute.
    """
    return session.kind != OWNER or session.turn is not None


def owner_only(session: Session, what: str) -> None:
    """Refuse ``what`` to a confined session (``history``, ``undo``: they see or touch every namespace)."""
    if session.kind != OWNER:
        raise RpcError(ACCESS_DENIED, f"{what} is for the owner only; a {session.kind} session may not use it")


def admission(handlers: Mapping[str, Handler], allowed_uids: Mapping[int, str] = MappingProxyType({}),
              owner_uid: int | None = None) -> Admission:
    """Who the socket serves (docs/security/transport.md, "Other uids"): the owner (default: our
    effective uid) reaches every handler; each uid of ``allowed_uids`` (``{1001: "peer:alice"}``)
    reaches them behind :func:`bind_uids`'s gate, as its one session; anyone else is refused.

    Raises DaemonError for the old list form, a bad session or the owner among the bound uids.
    """
    owner = os.geteuid() if owner_uid is None else owner_uid
    bound = _bindings(allowed_uids, owner)
    table = dict(handlers)
    gated = bind_uids(table, bound, owner) if bound else table

    def handlers_for(peer: Peer) -> Mapping[str, Handler] | None:
        if peer.uid == owner:
            return table
        return gated if peer.uid in bound else None

    return Admission(handlers_for, owner, frozenset(bound))


def _bindings(allowed: Mapping[int, str], owner: int) -> dict[int, Session]:
    """Each other uid's session; raises DaemonError for the old list form, a bad session, or the owner."""
    if not isinstance(allowed, Mapping):
        raise DaemonError('allowed_uids must map each uid to its one session, e.g. {1001: "peer:alice"}; '
                          f"a list of uids is no longer accepted (got {list(allowed)[:5]!r})")
    out: dict[int, Session] = {}
    for uid, text in allowed.items():
        if uid == owner:
            raise DaemonError(f"allowed_uids names uid {uid}, the daemon's own: the owner cannot be bound")
        try:
            out[uid] = parse_binding(text)
        except SessionError as exc:
            raise DaemonError(f"allowed_uids[{uid}]: {exc}") from None
    return out


def bind_uids(handlers: Mapping[str, Handler], bound: Mapping[int, Session], owner_uid: int) -> dict[str, Handler]:
    """``handlers`` behind the gate for other uids (docs/security/transport.md, "Other uids").

    The owner's requests pass untouched. A uid in ``bound`` reaches only :data:`BOUND_METHODS`,
    always as its one session: no ``session`` param means that session, a different one is
    ACCESS_DENIED (only ``turn`` may be added). Any other uid is refused (the server closes
    such connections before any request; this is the second lock).
    """
    return {name: _Gate(name, handler, bound, owner_uid) for name, handler in handlers.items()}


@dataclass(frozen=True)
class _Gate:
    method: str
    handler: Handler
    bound: Mapping[int, Session]
    owner_uid: int

    def __call__(self, params: dict[str, Any], peer: Peer) -> Any:
        if peer.uid == self.owner_uid:
            return self.handler(params, peer)
        session = self.bound.get(peer.uid)
        if session is None or self.method not in BOUND_METHODS:
            log.warning("peer.method_denied", uid=peer.uid, pid=peer.pid, method=self.method)
            who = f"uid {peer.uid}" + ("" if session is None else f" (bound to {binding_text(session)})")
            raise RpcError(ACCESS_DENIED, f"{self.method} is for the owner only; {who} may not call it")
        return self.handler({**params, SESSION_PARAM: _as_bound(params.get(SESSION_PARAM), session, peer)}, peer)


def _as_bound(raw: object, bound: Session, peer: Peer) -> dict[str, str]:
    """The ``session`` param a bound uid's request goes on with: its own session (plus the ``turn`` it sent)."""
    if raw is None:
        return bound.describe()
    claimed = SessionClaim(raw, owner_allowed=False).resolve()
    if (claimed.kind, claimed.peer, claimed.group) != (bound.kind, bound.peer, bound.group):
        log.warning("peer.session_denied", uid=peer.uid, pid=peer.pid, bound=binding_text(bound))
        raise RpcError(ACCESS_DENIED, f"uid {peer.uid} is bound to the session {binding_text(bound)}; "
                       "it may not choose another")
    return claimed.describe()
