"""A first start's model build, planned without building: what a caller needs to serve meanwhile.

Why: the default model (``e5-small``) is built once per user into the model cache, ~10 s on 2
cores (``bench/model_build.py``), and a daemon that waited for it answered nothing for that long
on its very first start. Everything the index needs *before* the model is known without it:
the model id (the weights' digest and the settings, :func:`~memoryd.indexer.embedding.registry.e5_model_id`),
the vector width, and token counts (the tokenizer ships ready). So the daemon opens the index with
them, answers keyword searches at once, and runs :attr:`BuildPlan.build` then :attr:`BuildPlan.load`
on a thread of its own (:mod:`memoryd.daemon.model_build`).

Pure: nothing here starts a thread or builds anything; :func:`plan_first_build` only looks at the
cache and reads the weights' digest (~50 ms, only when the cache holds no model of this recipe).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.indexer.config import EmbeddingConfig

if TYPE_CHECKING:
    from memoryd.indexer.embedding.tokenization import TokenizerAdapter
    from memoryd.indexer.types import Embedder

E5_DIMENSION = 384  # multilingual-e5-small's width (build_files refuses weights of another)
# What status says a first build takes, rounded up: bench/model_build.py, the whole first load into an
# empty cache, 7.7-10.3 s wall on 2 cores at load 3-5; in a daemon's first start (niced, beside the
# first sweep: bench/first_start.py) 8.6-10.6 s. More on a busier machine: status shows the time so far.
E5_BUILD_S = 10.0


@dataclass(frozen=True)
class BuildPlan:
    """An embedder that is not there yet: its identity now, its model later.

    ``build`` makes the missing model files (the slow part, in a child process: run it at low
    priority); ``load`` then opens them and returns the embedder, whose ``model_id`` and
    ``dimension`` must be these (sessions are made there: run it at normal priority, since a
    session's threads keep the priority of the thread that made it)."""

    model_id: str
    dimension: int
    queries: str  # the query and passage precision status shows meanwhile ("int8" | "exact")
    passages: str
    expected_s: float
    count_tokens: Callable[[Sequence[str]], list[int]]
    build: Callable[[], None]
    load: Callable[[], Embedder]


def plan_first_build(cfg: EmbeddingConfig, model_dir: Path, api_key: str = "") -> BuildPlan | None:
    """The plan when loading ``cfg``'s embedder would first build its model; None when it loads as it
    always did: any provider but ``e5-small``, or a cache that holds an exact model of this recipe
    already. (Of older weights too: that rare upgrade builds before serving, as every start once did.
    And a cache with the exact model but without an int8 twin — a twin that failed to build — loads
    as before too, falling back to the exact graph under its own model id.)"""
    if cfg.provider != "e5-small":
        return None
    from memoryd.indexer.embedding.e5_model import CONVERTER_VERSION, e5_weights_path, model_sha256

    if any(model_dir.glob(f"e5-small-q4-*-r{CONVERTER_VERSION}.onnx")):
        return None
    weights = e5_weights_path()  # a missing package: raised here as load_embedder would (ModelError)
    from memoryd.indexer.embedding.registry import e5_model_id, e5_settings, load_embedder

    settings = e5_settings(cfg)
    int8_q, int8_p = cfg.query_precision == "int8", cfg.passage_precision == "int8"

    def build() -> None:
        from memoryd.indexer.embedding.e5_model import prebuild

        prebuild(model_dir, query=int8_q, passage=int8_p)

    counter = _LazyCounter(settings.max_tokens)
    return BuildPlan(
        model_id=e5_model_id(settings, model_sha256(weights), passages_int8=int8_p),
        dimension=E5_DIMENSION, queries="int8" if int8_q else "exact", passages="int8" if int8_p else "exact",
        expected_s=E5_BUILD_S, count_tokens=counter, build=build,
        load=lambda: load_embedder(cfg, model_dir, api_key, tokenizer=counter.adapter()),  # one tokenizer load
    )


class _LazyCounter:
    """The e5 tokenizer's counts, loaded at the first call (~0.6 s: not on the way to the socket), and
    handed to the model's loader (one load: see ``load_embedder``'s ``tokenizer``)."""

    def __init__(self, max_tokens: int) -> None:
        self._max_tokens = max_tokens
        self._tok: TokenizerAdapter | None = None

    def __call__(self, texts: Sequence[str]) -> list[int]:
        return self.adapter().count(texts)

    def adapter(self) -> TokenizerAdapter:
        """The tokenizer, loaded now if no count asked for it yet (the model's loader takes it over)."""
        if self._tok is None:  # two first callers at once load it twice: no harm
            from memoryd.indexer.embedding.e5_model import e5_tokenizer_path
            from memoryd.indexer.embedding.tokenization import TokenizerAdapter

            self._tok = TokenizerAdapter(e5_tokenizer_path(), self._max_tokens)
        return self._tok
