from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memoryd.indexer import config
from memoryd.indexer.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _strip_env(cfg: config.Config) -> config.Config:
    return dataclasses.replace(cfg, state_home=Path("/s"), data_home=Path("/d"), cache_home=Path("/c"),
                               runtime_dir=None)


def test_shipped_config_equals_builtin_defaults() -> None:
    shipped = config.load(REPO / "config" / "memoryd.toml", env={"HOME": "/h"})
    assert _strip_env(shipped) == _strip_env(config.Config())


def test_every_default_key_is_documented_in_the_shipped_file() -> None:
    text = (REPO / "config" / "memoryd.toml").read_text()
    for section in dataclasses.fields(config.Config):
        if not dataclasses.is_dataclass(getattr(config.Config(), section.name)):
            continue  # the XDG directories: filled from the environment, not from the file
        assert f"[{section.name}]" in text
        for f in dataclasses.fields(getattr(config.Config(), section.name)):
            assert f"\n{f.name} = " in text, f"{section.name}.{f.name} missing from config/memoryd.toml"


def test_xdg_locations_come_from_env(tmp_path: Path) -> None:
    env = {"HOME": "/home/u", "XDG_STATE_HOME": "/st", "XDG_RUNTIME_DIR": "/run/user/7",
           "XDG_CONFIG_HOME": str(tmp_path)}
    cfg = config.load(None, env=env)
    assert cfg.data_dir == Path("/st/memoryd")
    assert cfg.socket_path == Path("/run/user/7/memoryd/memoryd.sock")
    assert cfg.effective_roots == (Path("/home/u/.local/share/memoryd/memory"),)
    assert cfg.model_cache_dir == Path("/home/u/.cache/memoryd/models")


def test_model_cache_follows_xdg_cache_home_and_ignores_a_relative_one(tmp_path: Path) -> None:
    env = {"HOME": "/home/u", "XDG_CONFIG_HOME": str(tmp_path), "XDG_CACHE_HOME": "/var/cache/u"}
    assert config.load(None, env=env).model_cache_dir == Path("/var/cache/u/memoryd/models")
    relative = {**env, "XDG_CACHE_HOME": "cache", "XDG_STATE_HOME": "state"}  # the XDG spec: ignore relative paths
    cfg = config.load(None, env=relative)
    assert cfg.model_cache_dir == Path("/home/u/.cache/memoryd/models")
    assert cfg.data_dir == Path("/home/u/.local/state/memoryd")


def test_default_location_is_read_when_present(tmp_path: Path) -> None:
    (tmp_path / "memoryd").mkdir()
    (tmp_path / "memoryd" / "memoryd.toml").write_text("[watch]\ndebounce_ms = 250\n")
    cfg = config.load(None, env={"HOME": "/h", "XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.watch.debounce_ms == 250


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[watch]\ndebounce = 1\n", "watch.debounce"),
        ("[nonsense]\na = 1\n", "nonsense"),
        ("top = 1\n", "top"),
        ("[watch]\ndebounce_ms = 'fast'\n", "watch.debounce_ms"),
        ("[watch]\ndebounce_ms = -1\n", "watch.debounce_ms"),
        ("[watch]\nroots = 'notalist'\n", "watch.roots"),
        ("[search]\nmode = 'fuzzy'\n", "search.mode"),
        ("[search]\ncontext_line_model = 'no'\n", "search.context_line_model"),
        ("[chunking]\noverlap_tokens = 300\n", "chunking.overlap_tokens"),
        ("[embedding]\nprovider = 'onnx'\n", "embedding.model_path"),
        ("[embedding]\nquery_precision = 'fp16'\n", "embedding.query_precision"),
        ("[server]\nallowed_uids = ['x']\n", "server.allowed_uids"),
        ("[watch\n", "not valid TOML"),
        ("[log]\nlevel = true\n", "log.level"),
    ],
)
def test_bad_config_is_rejected_naming_the_key(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        config.load(p, env={"HOME": "/h"})


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(tmp_path / "nope.toml", env={})


def test_cli_overrides_replace_roots_and_paths(tmp_path: Path) -> None:
    cfg = config.with_overrides(config.Config(), roots=[tmp_path / "a", tmp_path / "b"],
                                data_dir=tmp_path / "d", socket=tmp_path / "s.sock")
    assert cfg.watch.roots == (tmp_path / "a", tmp_path / "b")
    assert cfg.data_dir == tmp_path / "d"
    assert cfg.socket_path == tmp_path / "s.sock"


def test_paths_are_expanded(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[watch]\nroots = ["~/notes"]\n[storage]\ndata_dir = "~/idx"\n')
    cfg = config.load(p, env={})
    assert cfg.watch.roots[0] == Path.home() / "notes"
    assert cfg.data_dir == Path.home() / "idx"
