"""The ``observe`` request: parsed and checked before anything is read or written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.api.session import SessionClaim
from memoryd.daemon.api.vocabulary import ObserveParams, param_names
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Peer, param, reject_unknown
from memoryd.indexer.observe.transcript import FORMATS, MAX_TURN_CHARS, TranscriptError, Turn, parse

MAX_SESSION_ID = 200
MAX_TURNS = 5000
_TURN_ID = re.compile(r"[0-9a-f]{20}\.[0-9]{1,6}")


@dataclass(frozen=True)
class ObserveRequest:
    session_id: str
    namespace: str | None
    turns: list[Turn]
    claim: SessionClaim
    wait: bool  # extract before answering (the CLI's --wait; tests)
    final: bool  # the conversation ended (SessionEnd): extraction is not held back by the throttle


def parse_observe(params: dict[str, Any], peer: Peer) -> ObserveRequest:
    """``{session_id, namespace?, transcript? (text, any format) | turns? ([{role, text, id?}]), format?,
    wait?, final?, session?}``; InvalidParams naming the param at fault."""
    reject_unknown(params, param_names(ObserveParams))
    sid = param(params, "session_id", str)
    if not sid.strip() or len(sid) > MAX_SESSION_ID or any(not ch.isprintable() for ch in sid):
        raise InvalidParams(f"param 'session_id' must be 1..{MAX_SESSION_ID} printable characters")
    ns = param(params, "namespace", str, None)
    fmt = param(params, "format", str, "auto")
    if fmt not in FORMATS:
        raise InvalidParams(f"param 'format' must be one of {list(FORMATS)}, got {fmt[:40]!r}")
    text = param(params, "transcript", str, None)
    raw_turns = params.get("turns")
    if (text is None) == (raw_turns is None):
        raise InvalidParams("give exactly one of 'transcript' (text) and 'turns' (a list)")
    if text is not None:
        try:
            turns = parse(text, fmt)
        except TranscriptError as exc:
            raise InvalidParams(f"param 'transcript': {exc}") from None
    else:
        turns = _turns(raw_turns)
    return ObserveRequest(sid, ns, turns, SessionClaim.of(params, peer), param(params, "wait", bool, False),
                          param(params, "final", bool, False))


def _turns(raw: Any) -> list[Turn]:
    """``turns`` as the CLI sends them: already parsed (and ids computed over the whole transcript)."""
    from memoryd.indexer.observe.transcript import clean, with_ids

    if not isinstance(raw, list) or len(raw) > MAX_TURNS:
        raise InvalidParams(f"param 'turns' must be a list of at most {MAX_TURNS} {{role, text, id?}}")
    given: list[Turn] = []
    pairs: list[tuple[str, str]] = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("role"), str) or not isinstance(t.get("text"), str):
            raise InvalidParams(f"param 'turns[{i}]' must be {{role: str, text: str, id?: str}}")
        if len(t["text"]) > 4 * MAX_TURN_CHARS:
            raise InvalidParams(f"param 'turns[{i}].text' is longer than {4 * MAX_TURN_CHARS} characters")
        tid = t.get("id")
        if tid is not None:
            if not isinstance(tid, str) or not _TURN_ID.fullmatch(tid):
                raise InvalidParams(f"param 'turns[{i}].id' must be a turn id as 'memoryd observe' makes them")
            if t["role"] in ("user", "assistant") and clean(t["text"]):
                given.append(Turn(t["role"], clean(t["text"]), tid))
        else:
            pairs.append((t["role"], t["text"]))
    if given and pairs:
        raise InvalidParams("param 'turns': give an id for every turn or for none")
    return given or with_ids(pairs)
