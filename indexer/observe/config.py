"""``[observe]``'s settings, for this package's users: defined in :mod:`memoryd.indexer.settings.observe`
(beside the config, which must not import this package: it builds on the write path)."""

from __future__ import annotations

from memoryd.indexer.settings.observe import ObserveConfig, validate_observe

__all__ = ["ObserveConfig", "validate_observe"]
