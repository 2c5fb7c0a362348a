"""``memoryd search --offline`` and ``memoryd context --offline``: the daemon's read handlers, in-process.

The offline commands must answer what the socket would for the same flags — the same scope for
``namespace`` and ``path_prefix``, the same defaults, the same :class:`~memoryd.indexer.search.query.Query`,
the same reply — so they do not re-implement any of it: the params are parsed by the socket's own
parsers (:mod:`memoryd.daemon.api.requests`) as the owner (a person's own command), and run by the
socket's own :class:`~memoryd.daemon.api.read.ReadMethods` over the index opened read-only
(:func:`memoryd.daemon.oneshot.open_index`). What the daemon has and a one-shot command does not is
left out, as the daemon itself runs without it: no query-embedding thread (the searcher embeds the
query) and no line-vector cache (``context`` ranks excerpt lines by the matched lines).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memoryd.indexer.errors import MemorydError

if TYPE_CHECKING:
    from memoryd.daemon.api.read import ReadMethods
    from memoryd.daemon.api.vocabulary import ContextReply, SearchReply
    from memoryd.daemon.rpc.jsonrpc import Peer
    from memoryd.indexer.config import Config

T = TypeVar("T")


class OfflineParamsError(MemorydError):
    """Params the daemon would refuse (its message, without the RPC wrapping): a bad ``namespace`` or
    ``path_prefix``, ``sites`` on the embedded index ..."""


class _NoWorker:
    """Offline reads write nothing and the offline commands never call ``reindex`` (the one read method
    that needs the worker): a call here would be a bug, said so rather than hung on."""

    def _refuse(self) -> OfflineParamsError:
        return OfflineParamsError("offline reads have no index worker: reindex needs the daemon (memoryd run)")

    def call(self, fn: Callable[[], T]) -> Future[T]:
        raise self._refuse()

    def request_reconcile(self, reason: str) -> Future[dict[str, Any]]:
        raise self._refuse()

    def index_now(self, files: list[tuple[Path, str]]) -> Future[dict[str, Any]]:
        raise self._refuse()


def _owner() -> Peer:
    """This process as a socket peer: the daemon's own uid, hence an owner session."""
    from memoryd.daemon.rpc.jsonrpc import Peer

    return Peer(os.getpid(), os.getuid(), os.getgid())


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """The daemon's refusal of the params, as the offline commands' own typed error."""
    from memoryd.daemon.rpc.errors import RpcError

    try:
        yield
    except RpcError as exc:
        raise OfflineParamsError(exc.message) from None


@contextlib.contextmanager
def read_methods(cfg: Config) -> Iterator[ReadMethods]:
    """The socket's read handlers over the index opened read-only (closed on exit); quiet logs: stdout
    is for the result."""
    from memoryd.daemon.api.read import ReadMethods, query_vector_of
    from memoryd.daemon.logs import configure_logging
    from memoryd.daemon.oneshot import open_index
    from memoryd.daemon.roots import RootMap
    from memoryd.daemon.watch.pathfilter import PathFilter

    configure_logging(cfg.log.level if cfg.log.level in ("warning", "error") else "warning", cfg.log.format)
    index = open_index(cfg, read_only=True)
    roots = RootMap(cfg.effective_roots)
    try:
        yield ReadMethods(
            index=index, roots=lambda: roots, worker=_NoWorker(), search=cfg.search,
            path_filter=PathFilter(cfg.watch.include, cfg.watch.exclude), max_file_bytes=cfg.watch.max_file_bytes,
            count_tokens=index.embedder.count_tokens, query_vector=query_vector_of(None),
            redact_level=cfg.write.redact_index,
        )
    finally:
        index.close()


def offline_search(cfg: Config, params: dict[str, Any]) -> SearchReply:
    """The ``search`` socket method's answer, in-process. The params are parsed before the index (and
    the model) is opened, so a refused one costs nothing."""
    from memoryd.daemon.api.requests import parse_search

    with _refusals():
        req = parse_search(dict(params), _owner(), cfg.search, cfg.effective_roots[0])
        with read_methods(cfg) as reads:
            return reads.run_search(req)


def offline_context(cfg: Config, params: dict[str, Any]) -> ContextReply:
    """The ``context`` socket method's answer, in-process (parsed first, as :func:`offline_search`)."""
    from memoryd.daemon.api.requests import parse_context

    t0 = time.perf_counter()
    with _refusals():
        req = parse_context(dict(params), _owner(), cfg.effective_roots[0], cfg.search.min_score)
        with read_methods(cfg) as reads:
            return reads.run_context(req, t0)
