"""Confined sessions never see an absolute path (docs/security.md, "Agent isolation").

Why one wrapper and not a fix per method: a confined session (``direct``, ``group``,
``agent``) reads only inside its own folder of the first root, so the root's place on
disk tells it nothing it needs and everything about the owner's layout (home folder,
user name, other projects beside the notes). It was in every ``root`` field of a
search hit, a ``context`` source, a ``files`` entry and a ``get`` answer, and in
messages (``may only search /home/…/peers/alice/``). A check per method would miss the
next method added; so every handler is wrapped where they are assembled
(:func:`confine_paths`), and for a confined session its answer and its error are
rewritten on the way out:

* a ``root`` field whose value is a served root is dropped (every path a confined
  session sees is relative to the first root, which is the only one it may read);
* in every other string, ``ROOT/`` becomes nothing (an absolute path becomes its
  root-relative one) and a bare ``ROOT`` becomes ``<memory root>``; the data directory
  (the index, the logs) is written ``<data dir>``.

The owner's answers are untouched: the owner may know where its files are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.daemon.api.session import SESSION_PARAM
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import STORAGE_UNAVAILABLE, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer
from memoryd.indexer.access import OWNER
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.storage.base import StorageUnavailableError

ROOT_SHOWN = "<memory root>"
DATA_SHOWN = "<data dir>"


def is_confined(params: Mapping[str, Any]) -> bool:
    """Whether a request is a confined session's: its ``session`` names a kind other than the owner.

    A bound uid's request always carries its session here (:func:`memoryd.daemon.api.session.bind_uids`
    runs first); a request without one is the owner's.
    """
    raw = params.get(SESSION_PARAM)
    return isinstance(raw, dict) and raw.get("kind", OWNER) != OWNER


def confine_paths(handlers: Mapping[str, Handler], roots: Callable[[], RootMap],
                  data_dir: Path | None = None) -> dict[str, Handler]:
    """``handlers`` whose answers and errors, for a confined session, hold no absolute path."""
    return {name: _Confined(handler, roots, data_dir) for name, handler in handlers.items()}


@dataclass(frozen=True)
class _Confined:
    handler: Handler
    roots: Callable[[], RootMap]
    data_dir: Path | None

    def __call__(self, params: dict[str, Any], peer: Peer) -> Any:
        if not is_confined(params):
            return self.handler(params, peer)
        scrub = Scrubber.of(self.roots(), self.data_dir)
        try:
            return scrub.value(self.handler(params, peer))
        except RpcError as exc:
            raise RpcError(exc.code, scrub.text(exc.message), scrub.value(exc.data)) from None
        except StorageUnavailableError as exc:
            raise RpcError(STORAGE_UNAVAILABLE, scrub.text(str(exc)), scrub.value(exc.data())) from None
        except MemorydError as exc:
            raise RpcError(exc.rpc_code, scrub.text(str(exc)), scrub.value(exc.rpc_data())) from None


@dataclass(frozen=True)
class Scrubber:
    """Rewrites absolute paths of the served roots (and the data dir) out of a JSON value."""

    roots: frozenset[str]
    replacements: tuple[tuple[str, str], ...]  # longest first: a root inside another is replaced first

    @classmethod
    def of(cls, roots: RootMap, data_dir: Path | None = None) -> Scrubber:
        named = [(str(r).rstrip("/"), ROOT_SHOWN) for r in roots.roots]
        named += [(str(r.resolve()).rstrip("/"), ROOT_SHOWN) for r in roots.roots if r.resolve() != r]
        if data_dir is not None:
            named.append((str(data_dir).rstrip("/"), DATA_SHOWN))
        pairs: list[tuple[str, str]] = []
        for base, shown in sorted(set(named), key=lambda p: -len(p[0])):
            if base:
                pairs += [(f"{base}/", "" if shown == ROOT_SHOWN else f"{shown}/"), (base, shown)]
        return cls(frozenset(b for b, s in named if s == ROOT_SHOWN), tuple(pairs))

    def text(self, s: str) -> str:
        for old, new in self.replacements:
            if old in s:
                s = s.replace(old, new)
        return s

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()
                    if not (k == "root" and isinstance(x, str) and x.rstrip("/") in self.roots)}
        if isinstance(v, list | tuple):
            return [self.value(x) for x in v]
        return v
