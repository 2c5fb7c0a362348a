"""``memoryd doctor``'s ``[llm]`` check: off is fine; on, the server must answer and serve the model.

Asked with ``GET {url}/models``, which every OpenAI-compatible server answers and which spends
no tokens of ``llm.daily_tokens``. A server that is down is a FAIL (extraction will not run), with
the reminder that ``observe`` still captures conversations meanwhile. A server that answers while
the day's ``llm.daily_tokens`` is spent (the daemon's count, kept in the data dir) is a warn: every
model feature is paused until midnight UTC, which an ``ok`` would hide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.indexer.config import Config

OK, WARN, FAIL = "ok", "warn", "FAIL"  # doctor's levels (doctor.py builds the Check: no import cycle between the two)


def llm_check(cfg: Config) -> tuple[str, str, str]:
    """(level, message, fix) for ``[llm]`` (never the key: errors are scrubbed by the client)."""
    if cfg.llm.provider == "off":
        return (OK, "off: observe captures conversations as session notes (a model in [llm] adds extraction, "
                "context summaries, file abstracts and better 💾 proposals: docs/agents.md)", "")
    from memoryd.indexer.llm.budget import TokenBudget
    from memoryd.indexer.llm.client import BUDGET_FILE, load_client
    from memoryd.indexer.llm.errors import LLMError

    client = load_client(cfg.llm, cfg.llm_api_key, TokenBudget(0))
    try:
        served = client.check()
    except LLMError as exc:
        return (FAIL, str(exc), "start the server or fix llm.url / llm.model; observe captures "
                "meanwhile and extracts the turns once it answers")
    finally:
        client.close()
    today = TokenBudget(cfg.llm.daily_tokens, cfg.data_dir / BUDGET_FILE).snapshot()  # what the daemon counted
    used, daily = int(today["used"]), int(today["daily"])
    if daily and used >= daily:
        return (WARN, f"{served}, but llm.daily_tokens = {daily} is spent for {today['day']} (UTC): {used} used",
                "observe only captures (no extraction, summaries or abstracts) until 00:00 UTC; raise "
                "llm.daily_tokens to go on today")
    return (OK, f"{served}; {used} of {daily or 'unlimited'} tokens used today (UTC)", "")
