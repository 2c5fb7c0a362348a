"""The memory files as MCP *resources*: what ``memoryd mcp`` lists and how a resource URI maps back to a file.

Pure data and small pure functions, no SDK import (as :mod:`memoryd.daemon.client.mcp_tools`).
A resource is one memory file the session may read, named by its ``file://`` URI
(absolute, so two roots holding a ``MEMORY.md`` each give two distinct resources). The
bridge lists them with the daemon's ``files`` method and reads one with ``get``; the
daemon decides what the session may see, so a confined session lists and reads only its
own namespace, and a URI outside the memory folders is refused by the daemon's resolver,
not here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

MIME = "text/markdown"
PAGE = 200  # files per resources/list page


class ResourceError(ValueError):
    """A resource URI that names no memory file; ``str()`` is the message the host shows."""


CONFINED_SCHEME = "memoryd"  # memoryd:///REL: a confined session's files, which come without their root


def resource_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The MCP ``Resource`` fields for one entry of the daemon's ``files`` answer.

    A confined session's entries carry no ``root`` (it never sees an absolute path,
    docs/security.md): their URI is ``memoryd:///REL``, read back by its relative path. A file's
    ``abstract`` (made by the ``[llm]`` model at idle time), when it has one, ends its description:
    what a host shows beside the name when the person picks a file to attach.
    """
    modified = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["mtime"]))
    about = f" {entry['abstract']}" if entry.get("abstract") else ""
    root = entry.get("root")
    if not root:
        return {"uri": f"{CONFINED_SCHEME}:///{quote(entry['path'])}", "name": entry["path"],
                "title": entry["path"], "mimeType": MIME, "size": entry["size"],
                "description": f"Memory file (modified {modified}).{about}"}
    path = Path(root) / entry["path"]
    return {"uri": path.as_uri(), "name": entry["path"], "title": entry["path"], "mimeType": MIME,
            "size": entry["size"], "description": f"Memory file in {root} (modified {modified}).{about}"}


def path_of(uri: str) -> str:
    """The absolute path a ``file://`` resource URI names (percent-decoded); :class:`ResourceError` if none."""
    parts = urlsplit(uri)
    if parts.scheme == CONFINED_SCHEME and not parts.netloc and parts.path.startswith("/"):
        rel = unquote(parts.path[1:])
        if "\x00" in rel or not rel:
            raise ResourceError(f"not a memoryd resource: {uri[:200]!r}")
        return rel  # relative to the first root: the daemon's get checks it against the session
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise ResourceError(f"not a memoryd resource: {uri[:200]!r} (memory files are file:///ABSOLUTE/PATH URIs "
                            "from resources/list)")
    path = unquote(parts.path)
    if "\x00" in path:
        raise ResourceError("a resource URI must not contain NUL")
    return path


def cursor_offset(cursor: str | None) -> int:
    """The file offset a ``resources/list`` cursor stands for (None: the first page)."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ResourceError(f"bad resources/list cursor {cursor[:40]!r}: pass the nextCursor of the last page")
    return int(cursor)
