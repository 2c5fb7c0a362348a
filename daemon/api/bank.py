"""``bank_propose`` and ``bank_reply``: Memory Bank proposals over the socket (seed 002, docs/memory-api.md).

``bank_propose {turns | transcript, namespace?, session?}`` → ``{proposal: {target, type, points, by,
text} | null}``: what to propose after a turn — by the ``[llm]`` model when one is configured, by the
rules otherwise or when the model fails (:mod:`memoryd.indexer.write.proposal`). Nothing is written.

``bank_reply {prompt, previous | transcript, session?}`` → ``{answer, proposal?, written, refused}``: the
user's message after an assistant turn (``previous``, or the last assistant turn of ``transcript``).
Only when that turn held a 💾 proposal is the message an answer: ``confirm`` writes every point through
``remember`` as the session (gate, secret filter, router, dedup, limits, audit, history — the model
never writes on its own), ``reject`` writes nothing, anything else is ``ignored`` (the seed: ignored =
skipped). Without a proposal the answer is ``none`` and nothing is written, whatever the words.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import structlog

from memoryd.daemon.api.session import SESSION_PARAM, SessionClaim
from memoryd.daemon.api.vocabulary import BankProposeParams, BankReplyParams, param_names
from memoryd.daemon.api.write import WriteMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer, param, reject_unknown
from memoryd.indexer.access import parse_namespace
from memoryd.indexer.bank.turns import Turn, parse_turns, turns_of
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.write.intake import has_bank
from memoryd.indexer.write.proposal import Proposal, answer_of, parse, propose_by_model, propose_by_rules
from memoryd.indexer.write.router import TYPES

log = structlog.get_logger("memoryd")

MAX_TRANSCRIPT_CHARS = 4_000_000  # a long session's JSONL; only its last turns are read
MAX_PROMPT_CHARS = 20_000


class BankMethods:
    """The two methods; ``model`` returns the ``[llm]`` client, or None when none is configured."""

    def __init__(self, *, writes: WriteMethods, roots: Callable[[], RootMap],
                 model: Callable[[], JsonModel | None] = lambda: None) -> None:
        self._writes = writes
        self._roots = roots
        self._model = model

    def handlers(self) -> dict[str, Handler]:
        return {"bank_propose": self.propose, "bank_reply": self.reply}

    def propose(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, param_names(BankProposeParams))
        session = SessionClaim.of(params, peer).resolve()
        turns = _turns(params)
        try:
            ns = parse_namespace(param(params, "namespace", str, None), session)
        except MemorydError as exc:
            raise InvalidParams(str(exc)) from None
        bank, today, model = has_bank(self._roots().roots[0]), date.today(), self._model()
        if model is None:
            found = propose_by_rules(turns, ns, today, bank)
        else:
            found = propose_by_model(turns, ns, today, bank, model)
        log.info("bank.proposed", turns=len(turns), by=None if found is None else found.by,
                 points=0 if found is None else len(found.points))
        return {"proposal": None if found is None else found.to_json()}

    def reply(self, params: dict[str, Any], peer: Peer) -> dict[str, Any]:
        reject_unknown(params, param_names(BankReplyParams))
        prompt = param(params, "prompt", str)[:MAX_PROMPT_CHARS]
        previous = param(params, "previous", str, None)
        if previous is None:
            assistants = [t for t in _turns(params) if t.role == "assistant"]
            previous = assistants[-1].text if assistants else ""
        proposal = parse(previous)
        if proposal is None:
            return {"answer": "none", "written": [], "refused": []}
        kind = answer_of(prompt)
        if kind != "confirm":
            answer = "reject" if kind == "reject" else "ignored"
            log.info("bank.reply", answer=answer, points=len(proposal.points))
            return {"answer": answer, "proposal": _shown(proposal), "written": [], "refused": []}
        written, refused = self._apply(proposal, params.get(SESSION_PARAM), peer)
        log.info("bank.reply", answer="confirm", written=len(written), refused=len(refused))
        return {"answer": "confirm", "proposal": _shown(proposal), "written": written, "refused": refused}

    def _apply(self, proposal: Proposal, session: object, peer: Peer) -> tuple[list[Any], list[Any]]:
        """Each point through ``remember`` as the session: the one write path, its checks and its audit."""
        written: list[dict[str, Any]] = []
        refused: list[dict[str, Any]] = []
        kind = proposal.memory_type if proposal.memory_type in TYPES else None
        for point in proposal.points:
            params: dict[str, Any] = {"content": point}
            if kind is not None:
                params["type"] = kind
            if session is not None:
                params[SESSION_PARAM] = session
            try:
                out = self._writes.remember(params, peer)
            except RpcError as exc:
                refused.append({"point": point, "code": exc.code, "reason": exc.message})
                continue
            if out.get("decision") == "rejected":
                refused.append({"point": point, "reason": out.get("reason"), "rule": out.get("rule")})
            else:
                written.append({"point": point, "decision": out.get("decision"), "path": out.get("path"),
                                "line": out.get("line")})
        return written, refused


def _turns(params: dict[str, Any]) -> list[Turn]:
    if "turns" in params:
        turns = turns_of(params["turns"])
        if not isinstance(params["turns"], list):
            raise InvalidParams("param 'turns' must be a list of {role, text} objects")
        return turns
    transcript = param(params, "transcript", str, None)
    if transcript is None:
        raise InvalidParams("give param 'turns' (a list of {role, text}) or 'transcript' (its text)")
    if len(transcript) > MAX_TRANSCRIPT_CHARS:
        transcript = transcript[-MAX_TRANSCRIPT_CHARS:]
        transcript = transcript[transcript.find("\n") + 1:]  # from a whole line on
    return parse_turns(transcript)


def _shown(p: Proposal) -> dict[str, Any]:
    return {"target": p.target, "type": p.memory_type, "points": list(p.points)}
