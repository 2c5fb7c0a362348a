"""The parts of :mod:`memoryd.indexer.config` that live in files of their own: how a TOML table becomes a
dataclass (``tables``), the config file's trust checks (``trust``), and the optional providers' sections
(``llm``, ``observe``, ``rerank``). :class:`memoryd.indexer.config.Config` is still the one config object."""
