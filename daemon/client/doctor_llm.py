"""``memoryd doctor``'s ``[llm]`` check: off is fine; on, the server must answer and serve the model.

Asked with ``GET {url}/models``, which every OpenAI-compatible server answers and which spends
no tokens of ``llm.daily_tokens``. A server that is down is a FAIL (extraction will not run), with
the reminder that ``observe`` still captures conversations meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.indexer.config import Config

OK, FAIL = "ok", "FAIL"  # doctor's levels (doctor.py builds the Check: no import cycle between the two)


def llm_check(cfg: Config) -> tuple[str, str, str]:
    """(level, message, fix) for ``[llm]`` (never the key: errors are scrubbed by the client)."""
    if cfg.llm.provider == "off":
        return (OK, "off: observe captures conversations as session notes (a model in [llm] adds "
                "extraction, see docs/conversations.md)", "")
    from memoryd.indexer.llm.budget import TokenBudget
    from memoryd.indexer.llm.client import load_client
    from memoryd.indexer.llm.errors import LLMError

    client = load_client(cfg.llm, cfg.llm_api_key, TokenBudget(0))
    try:
        served = client.check()
    except LLMError as exc:
        return (FAIL, str(exc), "start the server or fix llm.url / llm.model; observe captures "
                "meanwhile and extracts the turns once it answers")
    finally:
        client.close()
    return (OK, served, "")
