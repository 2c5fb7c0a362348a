"""The MACHINE and USER blocks of Memory-Bank style Markdown files (docs/memory-bank.md).

A USER block (``<!-- USER_BLOCK_START -->`` … ``<!-- USER_BLOCK_END -->``) is
the user's: memoryd never changes a byte inside it. Writers locate the blocks
here and prove, after editing, that every USER block is byte-identical.
"""

from __future__ import annotations

import re

from memoryd.indexer.errors import MemorydError

MACHINE_START = "<!-- MACHINE_BLOCK_START -->"
MACHINE_END = "<!-- MACHINE_BLOCK_END -->"
USER_START = "<!-- USER_BLOCK_START -->"
USER_END = "<!-- USER_BLOCK_END -->"
TEMPLATE_MARKER = re.compile(r"<!--\s*MEMORY_BANK_TEMPLATE:v(\d+)\.(\d+)\s*-->")


class BlockError(MemorydError):
    """Block markers are missing, unbalanced, or a USER block would change."""


def user_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of every USER block, markers included.

    Raises :class:`BlockError` for a start without an end (or an end first):
    an unbalanced block is treated as "don't touch", never guessed at.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        start = text.find(USER_START, pos)
        stray_end = text.find(USER_END, pos)
        if start < 0:
            if stray_end >= 0:
                raise BlockError(f"'{USER_END}' at offset {stray_end} has no matching '{USER_START}'")
            return spans
        if 0 <= stray_end < start:
            raise BlockError(f"'{USER_END}' at offset {stray_end} has no matching '{USER_START}'")
        end = text.find(USER_END, start + len(USER_START))
        if end < 0:
            raise BlockError(f"'{USER_START}' at offset {start} is never closed by '{USER_END}'")
        spans.append((start, end + len(USER_END)))
        pos = end + len(USER_END)


def user_blocks(text: str) -> list[str]:
    return [text[a:b] for a, b in user_spans(text)]


def assert_user_blocks_unchanged(before: str, after: str, where: str) -> None:
    """Raise :class:`BlockError` naming ``where`` if any USER block differs between the two texts."""
    if user_blocks(before) != user_blocks(after):
        raise BlockError(f"{where}: refusing to write: a USER block would change")


def machine_span(text: str) -> tuple[int, int] | None:
    """``[start, end)`` of the MACHINE block's content (between its markers), or None."""
    a = text.find(MACHINE_START)
    b = text.find(MACHINE_END)
    if a < 0 or b < 0 or b < a:
        return None
    return a + len(MACHINE_START), b
