"""Small value types and protocols shared across the indexer.

Kept free of heavy imports (numpy is only named for type checking) so that the
CLI client can import the package without loading the model stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Chunk:
    """One window of a Markdown file.

    ``start_line``/``end_line`` are 1-based and inclusive, counted in the file as
    it is on disk (front matter included). ``text`` is the source lines exactly
    as written, joined with ``\\n``; ``heading`` is the heading path in force at
    the window's first line, joined with `` > `` (empty when there is none).
    """

    start_line: int
    end_line: int
    heading: str
    text: str


@dataclass(frozen=True)
class Document:
    """A parsed Markdown file: its chunks plus the front matter kept out of them."""

    chunks: list[Chunk]
    front_matter: str = ""
    warnings: list[str] = field(default_factory=list)


class TokenCounter(Protocol):
    """Counts model tokens (without special tokens) for each text, in order."""

    def __call__(self, texts: Sequence[str]) -> list[int]: ...


class Embedder(Protocol):
    """An embedding model behind memoryd's one interface.

    ``model_id`` identifies the vector space: two embedders with the same id
    must produce interchangeable vectors (it is part of every cache key and of
    the index identity, so changing it forces a clean re-embed). Vectors are
    float32 and L2-normalised; inner product is cosine similarity.
    """

    model_id: str
    dimension: int

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Model tokens per text, without special tokens or prefixes."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        """Embed documents (with the model's passage prefix): shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> FloatArray:
        """Embed one search query (with the model's query prefix): shape (dimension,)."""
        ...
