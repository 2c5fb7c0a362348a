"""What the stored rows were made with: the model, its width, the chunk settings and the text rules.

A backend stores this with its rows and compares it on opening (:class:`~memoryd.indexer.storage.base.Backend`'s
``identity``): rows made under another identity must not be mixed with new ones (vectors of two models,
chunks cut two ways, terms of two analysers). Every version that changes what a file becomes is here.
"""

from __future__ import annotations

from memoryd.indexer.config import Config
from memoryd.indexer.ingestion.chunker import CHUNKER_VERSION
from memoryd.indexer.ingestion.embedtext import EMBED_TEXT_VERSION
from memoryd.indexer.redaction.privacy import REDACT_VERSION
from memoryd.indexer.search import keyword
from memoryd.indexer.types import Embedder

__all__ = ["rows_identity"]


def rows_identity(cfg: Config, embedder: Embedder) -> dict[str, str]:
    """The identity of the rows this configuration and model make (every value a string: it is stored as JSON)."""
    c = cfg.chunking
    return {"model_id": embedder.model_id, "dimension": str(embedder.dimension),
            "chunking": f"{c.max_tokens}/{c.overlap_tokens}/v{CHUNKER_VERSION}", "embed_text": EMBED_TEXT_VERSION,
            "keyword": keyword.ANALYZER_VERSION, "redact": f"{cfg.write.redact_index}/v{REDACT_VERSION}"}
