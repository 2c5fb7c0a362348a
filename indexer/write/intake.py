"""The pure front half of ``remember``: quality gate → privacy filter → router → target path.

No model and no I/O (:func:`has_bank`, one ``is_file``, is asked separately): it
runs on the caller's thread, so noise and secrets are refused at once, without
queueing behind indexing. What passes becomes an :class:`Accepted` that
:class:`memoryd.indexer.write.writer.MemoryWriter` executes (embed → dedup →
edit → re-index) on the index's one writer thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from memoryd.indexer.access import Namespace, check_relative
from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.gate import quality_gate
from memoryd.indexer.write.router import BANK, BANK_DIR, Route, route


@dataclass(frozen=True)
class Accepted:
    """A memory that passed the gate and the filter, and the file it is routed to."""

    content: str  # the entry text to write (normalised, one line)
    route: Route
    namespace: Namespace
    target: str  # relative to the first root, posix

    def describe(self) -> dict[str, Any]:
        return {"type": self.route.memory_type, "section": self.route.section, "scope": self.route.scope,
                "importance": self.route.importance, "routed_by": self.route.matched}


@dataclass(frozen=True)
class Rejected:
    """Refused before any file was touched: ``stage`` is ``gate`` or ``privacy``."""

    stage: str
    rule: str
    reason: str


def has_bank(root: Path) -> bool:
    """Whether ``root`` holds a Memory Bank, whose own places ``remember`` then fills (router, ``bank``)."""
    return (root / BANK_DIR / "MEMORY.md").is_file()


def prepare(content: str, namespace: Namespace, today: date, memory_type: str | None = None,
            bank: bool = False) -> Accepted | Rejected:
    """Gate, filter and route ``content``. Raises ``UnknownType`` for a bad ``memory_type``.

    ``bank``: the first root holds a Memory Bank (:func:`has_bank`); the owner's default
    namespace is then routed with the ``bank`` layout.

    The privacy filter runs on the raw content too (not only the gate's
    normalised form), so nothing the gate strips can hide a secret.
    """
    gate = quality_gate(content)
    for text in (content, gate.content):
        secret = privacy.check(text)
        if not secret.passed:
            return Rejected("privacy", secret.rule, secret.reason)
    if not gate.passed:
        return Rejected("gate", gate.rule, gate.reason)
    layout = BANK if bank and namespace.kind == "default" else namespace.layout
    r = route(gate.content, today, memory_type, layout)
    target = f"{namespace.folder}/{r.target}" if namespace.folder else r.target
    named = privacy.check(target)  # the folder and file name are returned in every hit, list and export
    if not named.passed:
        return Rejected("privacy", named.rule, f"the namespace {privacy.redact(str(namespace), 'secrets')!r} "
                        f"would put a secret in a file path ({named.reason}); choose another name")
    return Accepted(gate.content, r, namespace, check_relative(target))
