"""Embedding models behind :class:`memoryd.indexer.types.Embedder`.

Entry point: :func:`load_embedder` (``EmbeddingConfig`` + model cache directory ->
embedder). Importing this package is cheap: numpy, onnxruntime and tokenizers
load only when a model does, so the CLI client can import the package tree.
The other names below are resolved lazily on first access.

Importing this package also sets ``ORT_DISABLE_TELEMETRY=1`` in the process
environment, before any onnxruntime import (every onnxruntime import of
memoryd goes through this package). onnxruntime 1.2x reads it once, when it is
imported: without it, the import alone writes a device id and an event
database (``onnxruntime.db``, table ``events``) for its telemetry under
``~/.cache/Microsoft/DeveloperTools/.onnxruntime``.

    load_embedder(cfg, model_dir) -> Embedder       registry.py (model_dir: the per-user model cache)
    ensure_e5_model(model_dir) -> Path              e5_model.py (built once, in a child, verified)
    OnnxEmbedder, EmbedderSettings, make_session    onnx_embedder.py
    HashEmbedder                                    hash_embedder.py (deterministic fake)
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # before onnxruntime is imported: see the docstring

from memoryd.indexer.embedding.registry import load_embedder  # after the line above, on purpose

if TYPE_CHECKING:
    from memoryd.indexer.embedding.e5_model import ensure_e5_model
    from memoryd.indexer.embedding.hash_embedder import HashEmbedder
    from memoryd.indexer.embedding.onnx_embedder import EmbedderSettings, OnnxEmbedder, make_session

__all__ = [
    "EmbedderSettings", "HashEmbedder", "OnnxEmbedder", "ensure_e5_model", "load_embedder", "make_session",
]

_LAZY = {
    "ensure_e5_model": "memoryd.indexer.embedding.e5_model",
    "HashEmbedder": "memoryd.indexer.embedding.hash_embedder",
    "OnnxEmbedder": "memoryd.indexer.embedding.onnx_embedder",
    "EmbedderSettings": "memoryd.indexer.embedding.onnx_embedder",
    "make_session": "memoryd.indexer.embedding.onnx_embedder",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
