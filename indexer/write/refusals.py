"""The write path's errors (all :class:`~memoryd.indexer.errors.MemorydError`), one per way a write is refused.

    MemorydError
    └── WriteError
        ├── SessionError     a malformed ``session`` (bad kind, id or field)
        ├── AccessDenied     the session may not do this (access.py's rules)
        ├── BadTarget        a path/namespace memoryd will not write (escape, symlink, not .md)
        ├── UnknownType      a ``type`` that is not a router type
        ├── EntryNotFound    ``forget``: no memory entry on that line
        └── WriteConflict    the file kept changing under us; nothing was written

The daemon maps each to its own JSON-RPC code (``daemon/api/write.py``).
"""

from __future__ import annotations

from memoryd.indexer.errors import MemorydError


class WriteError(MemorydError):
    """Base of the write path's refusals; the message is safe to show (it never quotes content)."""


class SessionError(WriteError):
    """The request's ``session`` is malformed."""


class AccessDenied(WriteError):
    """The session may not do this; the message says why (shown to the caller and audited)."""


class BadTarget(WriteError):
    """A path or namespace that memoryd refuses to write (escape, symlink, not ``.md``, bad id)."""


class UnknownType(WriteError):
    """A memory ``type`` that is not one of the router's types."""


class EntryNotFound(WriteError):
    """No memory entry (list item outside USER blocks) on the given line, or its text differs."""


class WriteConflict(WriteError):
    """The file changed on every attempt (or its blocks are broken): nothing was written."""
