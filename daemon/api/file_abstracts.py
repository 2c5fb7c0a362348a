"""A memory file's abstract, as the socket's file-level replies show it (``get``, ``files``; issue #40, item 4).

The abstracts are made at idle time by the ``[llm]`` model (:mod:`memoryd.daemon.work.abstract_job`)
and cached by sha256 of model id + the file's text as the index stores it (redacted at
``write.redact_index``). This module is the one way to look one up — for ``context``'s summary
section, ``get {abstract: true}`` and ``files {abstracts: true}`` alike — so that all three key it
by the same text the job abstracted: the file read now and redacted, which makes an edited file miss
(no stale abstract is ever shown) and keeps a secret the index hid out of any key.

Why a lookup is asked for and not always made: it reads and redacts the whole file (a quarter of a
second for a 1.6 MB one), which a page of lines or a listing must not pay unasked. Without a model
the answer is known at once (``off``) and nothing is read.

Confined sessions see these fields through the same path scrubbing as the rest of the reply
(:mod:`memoryd.daemon.api.confined_paths`); the text abstracted was redacted as their ``get`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.ingestion.files import read_memory_file

if TYPE_CHECKING:
    from memoryd.indexer.llm.port import JsonModel
    from memoryd.indexer.search.abstracts import AbstractStore

#: ``on``: a model is configured and abstracts are made at idle time (a file may have none yet);
#: ``off``: no ``[llm]`` model, so no file has one.
State = Literal["on", "off"]


@dataclass(frozen=True)
class FileAbstracts:
    """Cached abstracts by file, for the daemon's model (``model()``: None without ``[llm]``)."""

    store: AbstractStore | None
    model: Callable[[], JsonModel | None]
    max_file_bytes: int
    redact_level: str

    @property
    def state(self) -> State:
        return "on" if self.store is not None and self.model() is not None else "off"

    def of_text(self, raw: str) -> str | None:
        """The abstract of a file whose text (as read, unredacted) is ``raw``; None if none is cached."""
        model = self.model()
        if self.store is None or model is None:
            return None
        from memoryd.indexer.llm.port import model_id
        from memoryd.indexer.redaction import privacy

        return self.store.get(model_id(model), privacy.redact(raw, self.redact_level))  # what the job abstracted

    def of_file(self, root: Path, rel: str) -> str | None:
        """The abstract of ``root/rel`` read now; None if none is cached or the file cannot be read."""
        if self.state == "off":
            return None
        try:
            raw = read_memory_file(root / rel, root, self.max_file_bytes).text
        except (FileSkipped, OSError):
            return None
        return self.of_text(raw)
