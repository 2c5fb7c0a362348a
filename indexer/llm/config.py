"""``[llm]``'s settings, for this package's users: defined in :mod:`memoryd.indexer.settings.llm` (beside
the config, which must not import this package: it builds on the embedding provider's HTTP parts)."""

from __future__ import annotations

from memoryd.indexer.settings.llm import (
    LLM_PROVIDERS,
    MAX_KEY_BYTES,
    RESPONSE_FORMATS,
    LLMConfig,
    LLMProvider,
    ResponseFormat,
    read_key,
    validate_llm,
)

__all__ = ["LLM_PROVIDERS", "MAX_KEY_BYTES", "RESPONSE_FORMATS", "LLMConfig", "LLMProvider", "ResponseFormat",
           "read_key", "validate_llm"]
