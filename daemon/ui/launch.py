"""Handing the token to the browser without putting it on the browser's command line.

Why: ``memoryd ui`` used to run the browser with the token URL as an argument, and every
local user can read ``/proc/PID/cmdline``: another uid read the token and had the page's
powers (forget, edit, undo as the owner). A one-time login code in the URL would still be
on the command line, and whoever polls ``/proc`` fastest could spend it before the browser
starts; a file only we can read has no such race. So the browser is given a ``file://`` URL
of a 0600 HTML file (``mkstemp``: a random name, created 0600, never replaced), in
``$XDG_RUNTIME_DIR`` (0700) when there is one, else in the system temp folder, whose page
sends the browser on to the token URL (a meta refresh: no script). The file is removed as
soon as a request brings the token, and in any case when ``memoryd ui`` stops. The token URL
is still printed on the terminal, which is the user's own.
"""

from __future__ import annotations

import contextlib
import html
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url={url}"><title>memoryd ui</title></head>
<body><p>Opening <a href="{url}">memoryd ui</a>&hellip;</p></body></html>
"""


class Launcher:
    """The 0600 file that forwards the browser to the token URL; :meth:`remove` may be called any number of times."""

    def __init__(self, env: Mapping[str, str]) -> None:
        runtime = env.get("XDG_RUNTIME_DIR") or ""
        self._dir = runtime if os.path.isabs(runtime) and os.path.isdir(runtime) else None
        self._lock = threading.Lock()
        self.path: Path | None = None

    def write(self, url: str) -> str:
        """Create the file for ``url``; returns the ``file://`` URL to give the browser."""
        fd, name = tempfile.mkstemp(prefix="memoryd-ui-", suffix=".html", dir=self._dir)  # 0600, O_EXCL
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(PAGE.format(url=html.escape(url, quote=True)))
        with self._lock:
            self.path = Path(name)
        return Path(name).as_uri()

    def remove(self) -> None:
        """Delete the file (the token reached the server, or the server stops)."""
        with self._lock:
            path, self.path = self.path, None
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
