"""``memoryd doctor``'s ``[llm]`` check: off is fine; on, the server must answer and serve the model.

Asked with ``GET {url}/models``, which every OpenAI-compatible server answers and which spends
no tokens of ``llm.daily_tokens``. A server that is down is a FAIL (extraction will not run), with
the reminder that ``observe`` still captures conversations meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.daemon.client.doctor import FAIL, OK, Check

if TYPE_CHECKING:
    from memoryd.indexer.config import Config


def llm_check(cfg: Config) -> Check:
    """One line for ``[llm]`` (never the key: errors are scrubbed by the client)."""
    if cfg.llm.provider == "off":
        return Check("llm", OK, "off: observe captures conversations as session notes (a model in [llm] adds "
                     "extraction, see docs/conversations.md)")
    from memoryd.indexer.llm.budget import TokenBudget
    from memoryd.indexer.llm.client import load_client
    from memoryd.indexer.llm.errors import LLMError

    client = load_client(cfg.llm, cfg.llm_api_key, TokenBudget(0))
    try:
        served = client.check()
    except LLMError as exc:
        return Check("llm", FAIL, str(exc), "start the server or fix llm.url / llm.model; observe captures "
                     "meanwhile and extracts the turns once it answers")
    finally:
        client.close()
    return Check("llm", OK, served)
