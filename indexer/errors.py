"""The one exception tree of memoryd.

Library code raises these; only the edges (the CLI, the socket server) turn
them into messages and exit codes. Every message names the file, key or value
at fault, so that it can be shown to a user as it is. The write refusals live here too, not
in ``write/``: config (a bound uid's session), the path guard and the session grammar raise them,
and all three sit below the write pipeline. The daemon maps each to its JSON-RPC code.

    MemorydError
    ├── ConfigError          a bad config key or value (names ``section.key``)
    ├── ModelError           embedding model files missing, corrupt or unusable
    ├── StoreError           the on-disk index cannot be opened or written
    │   ├── StoreClosedError use of a store after ``close()``
    │   ├── StoreCorruptError the database file fails its integrity check
    │   └── DiskFullError    the data directory has no space left
    ├── FileSkipped          a memory file that cannot be indexed (binary, too big, ...)
    ├── WriteError           a write refused (the message is safe to show: it never quotes content)
    │   ├── SessionError     a malformed ``session`` (bad kind, id or field)
    │   ├── AccessDenied     the session may not do this (indexer/access.py's rules)
    │   ├── BadTarget        a path/namespace memoryd will not write (escape, symlink, not .md)
    │   ├── UnknownType      a ``type`` that is not a router type
    │   ├── EntryNotFound    ``forget``: no memory entry on that line
    │   └── WriteConflict    the file kept changing under us; nothing was written
    └── DaemonError          process-level failures (socket in use, daemon not running)
        ├── SocketInUseError a live daemon already listens on the socket path
        └── NotRunningError  a client found no daemon on the socket path
"""

from __future__ import annotations

import errno
from pathlib import Path

TYPE_CHECKING = False  # not typing's: the clients import this module and must not load typing (test_client)
if TYPE_CHECKING:
    from typing import Any, ClassVar

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a write that found no room: the disk is full, or the user's quota is used."""


class MemorydError(Exception):
    """Base class of every error memoryd raises on purpose.

    ``rpc_code`` is the JSON-RPC error code a socket answer carries for it (-32000, "application error",
    unless a subclass says otherwise) and :meth:`rpc_data` its ``data``: the error says what it is, so the
    transport maps no error type of its own (daemon/rpc/errors.py lists the codes)."""

    rpc_code: ClassVar[int] = -32000

    def rpc_data(self) -> dict[str, Any] | None:
        return None


class ConfigError(MemorydError):
    """A config key or value is unknown or invalid; the message names it."""


class ModelError(MemorydError):
    """The embedding model cannot be loaded, built or verified."""


class ProviderUnavailable(ModelError):
    """A remote embedding server (``embedding.provider = "openai"``) did not answer; vectors wait, keyword
    search goes on (indexer/embedding/openai_embedder.py)."""


class StoreError(MemorydError):
    """The on-disk index cannot be opened, read or written."""


class StoreClosedError(StoreError):
    """A store (or searcher) was used after ``close()``."""


class StoreCorruptError(StoreError):
    """The index database is not a valid SQLite file or fails ``quick_check``."""


class DiskFullError(StoreError):
    """The data directory (or a memory root) ran out of space; reads keep working, writes wait.

    ``directory`` names where the room ran out, when the raiser knows it (the socket
    answer carries it, so the user knows which disk to free).
    """

    rpc_code: ClassVar[int] = -32032  # DISK_FULL

    def __init__(self, message: str, directory: str | None = None) -> None:
        super().__init__(message)
        self.directory = directory

    def rpc_data(self) -> dict[str, Any] | None:
        return {"directory": self.directory} if self.directory else None

    @classmethod
    def of(cls, exc: OSError, directory: Path, what: str, after: str = "nothing was changed") -> DiskFullError:
        """The typed error of ``exc`` (an ENOSPC/EDQUOT ``OSError``) while writing ``what`` in ``directory``:
        a message that names the directory and says "no space left on device", and what became of the write."""
        why = "disk quota exceeded" if exc.errno == errno.EDQUOT else "no space left on device"
        return cls(f"{directory}: {why} while writing {what}; {after} (free some space and try again)",
                   str(directory))


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` that says the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


class FileSkipped(MemorydError):
    """A file that is not indexed, with the reason (``reason`` is a short stable code)."""

    def __init__(self, path: str, reason: str, detail: str = "") -> None:
        self.path = path
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}" + (f" ({detail})" if detail else ""))


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


class DaemonError(MemorydError):
    """A failure of the daemon process or of a client talking to it."""


class SocketInUseError(DaemonError):
    """Another live daemon answers on the socket path."""


class IndexInUseError(DaemonError):
    """Another process holds the data directory's lock (a daemon or ``memoryd index``)."""


class UntrustedListenerError(DaemonError):
    """The process listening on the socket is not the uid the client expects; nothing was sent to it."""


class NotRunningError(DaemonError):
    """No daemon answers on the socket path."""
