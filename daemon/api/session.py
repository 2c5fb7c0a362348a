"""Who is asking: the ``session`` param of a request, checked against the peer's uid.

Every method that reads or writes memories names its session here (absent = the
owner, allowed only for the daemon's own uid). The rules a session obeys live in
:mod:`memoryd.indexer.write.access`; this module turns their refusals into the
socket's errors (:mod:`memoryd.daemon.rpc.errors`), and says who is held to the
write rate limits (:func:`held_to_limits`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memoryd.daemon.rpc.errors import ACCESS_DENIED, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.indexer.write.access import OWNER, Session, parse_session
from memoryd.indexer.write.refusals import AccessDenied, SessionError

SESSION_PARAM = "session"


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


def session_for(params: dict[str, object], peer: Peer) -> Session:
    """The request's session (``params["session"]``; absent = owner for the daemon's own uid)."""
    return SessionClaim.of(params, peer).resolve()


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
