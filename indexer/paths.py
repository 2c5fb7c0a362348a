"""Where memoryd's files live by default (XDG), in one import-light module.

Shared by :mod:`memoryd.indexer.config` and the CLI's client commands, which must find
the socket without loading the full config machinery (editors run ``memoryd
reindex`` on every save). Functions take the environment as a parameter: only
the CLI's entry point and :func:`memoryd.indexer.config.load` pass ``os.environ``.

The XDG base directories are computed here rather than with ``platformdirs``:
memoryd runs on Linux only (Unix sockets, inotify, systemd), where the rules
are four lines, and ``platformdirs`` reads ``os.environ`` itself, which would
break the environment-as-a-parameter design the tests rely on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memoryd.indexer.errors import ConfigError


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def xdg_dir(env: Mapping[str, str], name: str, fallback: str) -> Path:
    """``$XDG_<name>_HOME`` when set to an absolute path (the spec says ignore a relative one), else ``~/fallback``."""
    value = env.get(f"XDG_{name}_HOME") or ""
    return Path(value) if os.path.isabs(value) else home(env) / fallback


def default_config_path(env: Mapping[str, str]) -> Path:
    return xdg_dir(env, "CONFIG", ".config") / "memoryd" / "memoryd.toml"


def default_socket_path(runtime_dir: Path | None) -> Path:
    """``$XDG_RUNTIME_DIR/memoryd/memoryd.sock``, or a per-uid folder in /tmp without one."""
    base = runtime_dir or Path(f"/tmp/memoryd-{os.getuid()}")
    return base / "memoryd" / "memoryd.sock"


def runtime_dir(env: Mapping[str, str]) -> Path | None:
    return Path(env["XDG_RUNTIME_DIR"]) if env.get("XDG_RUNTIME_DIR") else None


def client_socket_path(config: Path | None, env: Mapping[str, str]) -> Path:
    """The socket a client should use: ``[server] socket`` of the config file, else the default.

    Reads only that one key (the daemon validates the whole file at start).
    Raises :class:`ConfigError` when an explicit config file is missing or the
    file is not valid TOML.
    """
    sock = _client_server_table(config, env).get("socket")
    if isinstance(sock, str) and sock:
        return Path(os.path.abspath(os.path.expanduser(sock)))
    return default_socket_path(runtime_dir(env))


def client_daemon_uid(config: Path | None, env: Mapping[str, str]) -> int | None:
    """``[server] daemon_uid`` of the config file: the uid a client accepts as the listener (None: its own)."""
    value = _client_server_table(config, env).get("daemon_uid")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"config 'server.daemon_uid' must be a uid (an integer >= 0); got {value!r}")
    return value


def _client_server_table(config: Path | None, env: Mapping[str, str]) -> dict[str, object]:
    path = config or default_config_path(env)
    if path.exists():
        import tomllib

        from memoryd.indexer.settings.trust import check_config_file

        check_config_file(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc}") from None
        server = data.get("server")
        return server if isinstance(server, dict) else {}
    if config is not None:
        raise ConfigError(f"config file {config} does not exist")
    return {}
