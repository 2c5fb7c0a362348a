"""Terminal-safe output: control and escape characters from untrusted text are shown, never obeyed.

File names and memory content are untrusted input: a file named
``\\x1b]0;PWNED\\x07\\x1b[2J.md`` would otherwise set the title and clear the
screen of whoever runs ``memoryd search``. Every human-readable line the
CLI prints goes through :func:`escape` (``SafeStream`` wraps stdout/stderr of
the client commands), which replaces:

- C0 controls (``\\x00``-``\\x1f``) but newline and tab, as ``\\xNN`` (ESC is ``\\x1b``);
- DEL and the C1 controls (``\\x7f``-``\\x9f``; ``\\x9b`` is a one-byte CSI), as ``\\u00NN``;
- bidirectional overrides and isolates (``\\u202a``-``\\u202e``, ``\\u2066``-``\\u2069``),
  which reorder what is displayed ("Trojan Source"), as ``\\uNNNN``.

``\\uNNNN`` is also a valid JSON escape, so ``--json`` output stays valid JSON
(``json.dumps`` already escapes C0 itself). Newlines and tabs are kept: content
needs its layout. Imports only ``re`` and ``io``: every client command pays for it.
"""

from __future__ import annotations

import io
import re
from typing import TextIO

_C0 = re.compile(r"[\x00-\x08\x0b-\x1f]")
_WIDE = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NEWLINE_TAB = re.compile(r"[\n\t]")


def escape(text: str) -> str:
    """``text`` with every control/escape character but newline and tab spelt out."""
    text = _C0.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return _WIDE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_line(text: str) -> str:
    """:func:`escape` that also spells out newlines and tabs: for a name on one line (a path, a heading)."""
    return escape(_NEWLINE_TAB.sub(lambda m: "\\n" if m.group() == "\n" else "\\t", text))


class SafeStream(io.TextIOBase):
    """A text stream that writes :func:`escape`-d text to ``inner``."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner

    def write(self, s: str) -> int:
        self.inner.write(escape(s))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True
