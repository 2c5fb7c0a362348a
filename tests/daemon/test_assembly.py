"""The socket methods are assembled from a frozen record of parts, not from the daemon (issue #39 item 7).

``build_handlers(cfg, parts)`` reads nothing but its arguments and hands back what it opened; the
table it builds is the vocabulary's, method for method.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.api.jobs import Jobs
from memoryd.daemon.api.vocabulary import BY_NAME, METHODS, param_names
from memoryd.daemon.assembly import Assembled, Parts, build_handlers
from memoryd.daemon.oneshot import open_index, sweep_of
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.worker import IndexWorker
from memoryd.indexer.write.history import History
from tests.helpers import make_config

OWNER = Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())


class About:
    """``ping``/``status`` see only this: a version, a start time and a status (never called here)."""

    version = "9.9.9-test"
    started = time.monotonic()

    def status(self) -> object:
        raise AssertionError("status is not asked for in these tests")


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    root = tmp_path / "notes"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    index = open_index(cfg)
    roots = RootMap([root])
    flt = PathFilter(cfg.watch.include, cfg.watch.exclude)
    worker = IndexWorker(index, roots, flt, flt.accept_dir, sweep=sweep_of(index))  # never started
    try:
        yield Parts(index=index, worker=worker, roots=lambda: roots, path_filter=flt,
                    history=History.in_data_dir(cfg.data_dir), jobs=Jobs(), query_embeddings=None,
                    about=About())  # type: ignore[arg-type]  # a fake StatusProvider whose status() is unused
    finally:
        index.close()


def test_the_parts_are_frozen(parts: Parts) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.index = parts.index  # type: ignore[misc]


def test_handlers_are_built_from_the_parts_alone_and_match_the_vocabulary(parts: Parts, tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "notes", tmp_path / "data")
    built = build_handlers(cfg, parts)
    assert isinstance(built, Assembled)
    assert built.handlers.keys() == BY_NAME.keys()
    assert built.handlers["ping"]({}, OWNER)["version"] == "9.9.9-test"  # the parts' own 'about'
    for close in built.closers:  # the audit logs (and a line cache) it opened, for the daemon to close
        close()


def test_every_handler_accepts_exactly_the_keys_its_params_type_names(parts: Parts, tmp_path: Path) -> None:
    """The row's params TypedDict is the parser's list: an unknown key is refused naming exactly its keys
    (run through the assembled handlers, so a method that parses inline is held to it too)."""
    handlers = build_handlers(make_config(tmp_path / "notes", tmp_path / "data"), parts).handlers
    for method in METHODS:
        with pytest.raises(InvalidParams) as exc:
            handlers[method.name]({"no_such_param": 1}, OWNER)
        assert str(sorted(param_names(method.params))) in str(exc.value), method.name
