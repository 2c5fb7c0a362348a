"""What every route of ``memoryd ui`` shares: the daemon, this start's keys, the templates, the flashes.

Apart from :mod:`memoryd.daemon.ui.app` (which assembles the app) so that the routes can name it
without an import cycle.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from memoryd.daemon.ui.bridge import Daemon
from memoryd.daemon.ui.security import Keys
from memoryd.daemon.ui.views import visible
from memoryd.indexer.config import SearchConfig, WriteConfig

HERE = Path(__file__).resolve().parent
MAX_FLASHES = 64
NAMESPACES_TTL_S = 10.0
QUICK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Settings:
    """What the page takes from memoryd's config (the one ``memoryd ui --config`` names, as the daemon's):
    which sections ``update_section`` may replace (only those get an "edit section"), and the calibrated
    score under which the daemon's context and MCP tools abstain (hits under it are "weaker matches")."""

    sections: tuple[str, ...] = WriteConfig().sections
    min_score: float = SearchConfig().min_score

    def writable(self, title: str | None) -> bool:
        return bool(title) and (title or "").strip().casefold() in {s.strip().casefold() for s in self.sections}


class Flashes:
    """One-shot messages from a POST to the page it redirects to, by random id (bounded, thread-safe); a
    refusal can carry what the person typed (``draft``), so the page where they acted shows it again."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[str, str, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, kind: str, text: str, draft: str | None = None) -> str:
        key = secrets.token_urlsafe(8)
        with self._lock:
            self._items[key] = (kind, text, draft)
            while len(self._items) > MAX_FLASHES:
                self._items.popitem(last=False)
        return key

    def peek(self, key: str | None) -> tuple[str, str, str | None] | None:
        """The message ``key`` without using it up (the page that renders it pops it)."""
        if not key:
            return None
        with self._lock:
            return self._items.get(key)

    def pop(self, key: str | None) -> tuple[str, str, str | None] | None:
        if not key:
            return None
        with self._lock:
            return self._items.pop(key, None)


@dataclass
class Ui:
    """What every route needs: the daemon, this start's keys, the templates, the flashes. ``quick`` is the
    daemon too, with a shorter timeout, for the one page answered on the event loop (search as you type)."""

    daemon: Daemon
    quick: Daemon
    keys: Keys
    port: int
    env: jinja2.Environment
    settings: Settings = field(default_factory=Settings)
    flashes: Flashes = field(default_factory=Flashes)
    _namespaces: tuple[float, list[str]] = (float("-inf"), [])

    def stats(self) -> dict[str, Any]:
        """The daemon's ``stats`` (it reads every memory file); its namespace names are kept a while."""
        stats: dict[str, Any] = self.daemon.call("stats", {})
        self._namespaces = (time.monotonic(), sorted(stats.get("namespaces", {})))
        return stats

    def namespaces(self) -> list[str]:
        """The namespace names for a filter menu: from a ``stats`` at most ``NAMESPACES_TTL_S`` old."""
        at, names = self._namespaces
        return names if time.monotonic() - at < NAMESPACES_TTL_S else sorted(self.stats().get("namespaces", {}))

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        flash = self.flashes.pop(request.query_params.get("flash"))
        html = self.env.get_template(template).render(csrf=self.keys.csrf, flash=flash, path=request.url.path,
                                                        **context)
        return HTMLResponse(html, status_code=status)

    def close(self) -> None:
        self.daemon.close()
        self.quick.close()

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.page(request, "error.html", status=status, status_code=status, message=message, nav="",
                         how_to_start=status == 503 and "memoryd run" not in message)


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template is HTML
        finalize=visible,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
