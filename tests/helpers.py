"""Test helpers: a counting embedder wrapper, a config for throw-away indexes, bounded polling."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.indexer.config import Config, EmbeddingConfig, WatchConfig, with_overrides

if TYPE_CHECKING:
    from memoryd.daemon.rpc.server import SocketServer


class CountingEmbedder:
    """Wraps an embedder and counts the passages it embeds (to prove cache hits)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.embedded = 0
        self.calls = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        self.embedded += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def make_config(root: Path | list[Path], data_dir: Path, **watch: Any) -> Config:
    roots = root if isinstance(root, list) else [root]
    cfg = with_overrides(Config(), roots=roots, data_dir=data_dir)
    return dataclasses.replace(
        cfg,
        embedding=EmbeddingConfig(provider="hash"),
        watch=dataclasses.replace(cfg.watch, **watch) if watch else cfg.watch,
    )


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def listening(sock: Path) -> bool:
    """Something accepts connections on ``sock`` (the path exists a moment before ``listen``)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


def start_daemon(
    tmp_path: Path, socket: Path, files: dict[str, str], timeout: float = 10.0,
    tweak: Callable[[Config], Config] = lambda cfg: cfg, **config: Any,
) -> tuple[Any, Any, Path]:
    """The one in-process daemon builder: a daemon (hash embedder, short debounce) on ``tmp_path/root``
    holding ``files``, started and idle; returns ``(daemon, client, root)``. The caller closes the
    client and shuts the daemon down.

    ``config`` replaces whole config sections (e.g. ``write=...``) on top of the test config;
    ``tweak`` edits the result (e.g. a few fields of a section).
    """
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.client.rpc_client import Client

    root = tmp_path / "root"
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = make_config(root, tmp_path / "data", debounce_ms=100, max_delay_ms=1000)
    cfg = tweak(dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=socket), **config))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=timeout)
    try:
        wait_for(lambda: ready(client), timeout=max(10.0, timeout), what="start-up reconcile")
        # a first start on an empty model cache builds the model in the background (daemon/model_build.py):
        # a test of a started daemon means one with its model (tests/daemon/test_model_build_background.py
        # tests the time before), and a build left running would outlive the test as a thread
        wait_for(lambda: model_settled(client), timeout=max(300.0, timeout), what="the embedding model's first build")
    except BaseException:
        client.close()
        d.shutdown()
        raise
    return d, client, root


@contextmanager
def running_daemon(
    tmp_path: Path, socket: Path, files: dict[str, str], timeout: float = 10.0,
    tweak: Callable[[Config], Config] = lambda cfg: cfg, **config: Any,
) -> Iterator[tuple[Any, Any, Path]]:
    """:func:`start_daemon` as a context manager: shuts everything down after."""
    d, client, root = start_daemon(tmp_path, socket, files, timeout, tweak, **config)
    try:
        yield d, client, root
    finally:
        client.close()
        d.shutdown()


def model_settled(client: Any) -> bool:
    """The daemon behind ``client`` is not building its model (it has it, or the build failed)."""
    build = client.call("status").get("model_build")
    return build is None or build.get("state") != "building"


def ready(client: Any) -> bool:
    """The daemon behind ``client`` has nothing queued and is not reconciling."""
    st = client.call("status")
    return st["pending"] == 0 and not st["reconciling"]


def socket_server(path: Path, handlers: Mapping[str, Any], *, allowed_uids: Mapping[int, str] | None = None,
                  owner_uid: int | None = None, **limits: Any) -> SocketServer:
    """A socket server for ``handlers`` composed as the daemon composes one: ``limits`` are
    :class:`~memoryd.daemon.rpc.serving.ServerConfig`'s fields, the uids go through the session gate
    (:func:`memoryd.daemon.api.session.admission`; ``owner_uid`` a foreign uid to see our own
    connection refused, or bound)."""
    from memoryd.daemon.api.session import admission
    from memoryd.daemon.rpc.server import SocketServer
    from memoryd.daemon.rpc.serving import ServerConfig

    return SocketServer(ServerConfig(Path(path), **limits), admission(handlers, allowed_uids or {}, owner_uid))


__all__ = ["CountingEmbedder", "WatchConfig", "listening", "make_config", "ready", "running_daemon", "socket_server",
           "start_daemon", "wait_for"]
