"""The ``[llm]`` provider: any OpenAI-compatible ``/v1/chat/completions`` server, off by default.

Import surface (other features build on these only):

* :class:`~memoryd.indexer.llm.config.LLMConfig`, :func:`~memoryd.indexer.llm.config.validate_llm`,
  :func:`~memoryd.indexer.llm.config.read_key` — the ``[llm]`` table, checked at start;
* :class:`~memoryd.indexer.llm.client.LLMClient` and its ``complete_json(messages, schema) -> dict``,
  built by :func:`~memoryd.indexer.llm.client.load_client`;
* :class:`~memoryd.indexer.llm.budget.TokenBudget` — the per-day token cap;
* the errors in :mod:`~memoryd.indexer.llm.errors` (LLMUnavailable, LLMBadAnswer, LLMBudgetExhausted, LLMOff).

A pure library like the rest of ``indexer/``: no thread, no global state; the daemon builds one
client at start (when ``provider != "off"``) and hands it to what needs it.
"""
