"""The exit statuses of every ``memoryd`` command, in one table (scripts and unit files rely on them).

Imports nothing: the CLI loads it on every run.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1  # an error the command reported (message on stderr)
EXIT_REJECTED = 1  # ``remember``: the quality gate or the privacy filter refused the memory
EXIT_USAGE = 2  # bad arguments
EXIT_STARTUP = 3  # the daemon (or the MCP bridge) could not start: config, lock, socket, model
EXIT_NOT_RUNNING = 4  # no daemon answers on the socket
EXIT_STORAGE_UNAVAILABLE = 5  # the daemon's database backend is unreachable (JSON-RPC -32031)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_BROKEN_PIPE = 141  # the reader closed stdout early (`memoryd search x | head`): quiet, as 128 + SIGPIPE
