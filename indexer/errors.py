"""The one exception tree of memoryd.

Library code raises these; only the edges (the CLI, the socket server) turn
them into messages and exit codes. Every message names the file, key or value
at fault, so that it can be shown to a user as it is.

    MemorydError
    ├── ConfigError          a bad config key or value (names ``section.key``)
    ├── ModelError           embedding model files missing, corrupt or unusable
    ├── StoreError           the on-disk index cannot be opened or written
    │   ├── StoreClosedError use of a store after ``close()``
    │   ├── StoreCorruptError the database file fails its integrity check
    │   └── DiskFullError    the data directory has no space left
    ├── FileSkipped          a memory file that cannot be indexed (binary, too big, ...)
    └── DaemonError          process-level failures (socket in use, daemon not running)
        ├── SocketInUseError a live daemon already listens on the socket path
        └── NotRunningError  a client found no daemon on the socket path
"""

from __future__ import annotations


class MemorydError(Exception):
    """Base class of every error memoryd raises on purpose."""


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
    """The data directory ran out of space; reads keep working, writes wait."""


class FileSkipped(MemorydError):
    """A file that is not indexed, with the reason (``reason`` is a short stable code)."""

    def __init__(self, path: str, reason: str, detail: str = "") -> None:
        self.path = path
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: {reason}" + (f" ({detail})" if detail else ""))


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
