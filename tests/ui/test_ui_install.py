"""``memoryd ui`` after any of the README's installs: its dependencies are memoryd's own, and when one
is missing anyway the message names the command for *this* install (pipx, uv tool, a venv, the system)."""

from __future__ import annotations

import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from memoryd.daemon.client.install_hint import (
    PIPX,
    SYSTEM,
    UI_REQUIREMENTS,
    UV_TOOL,
    UV_VENV,
    VENV,
    detect,
    missing_ui_message,
)

REPO = Path(__file__).resolve().parents[2]
PKGS = " ".join(shlex.quote(p) for p in UI_REQUIREMENTS)


def test_the_ui_dependencies_are_in_the_default_install() -> None:
    """pipx/uv tool/make setup install the default dependencies only: the UI's must be among them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert set(UI_REQUIREMENTS) <= set(project["dependencies"])
    assert project["optional-dependencies"]["ui"] == []  # `memoryd[ui]` still resolves, adding nothing


def test_a_pipx_install_is_told_to_inject(tmp_path: Path) -> None:
    venv = tmp_path / "pipx" / "venvs" / "memoryd"
    venv.mkdir(parents=True)
    (venv / "pipx_metadata.json").write_text("{}")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    found = detect(venv, "/usr", str(venv / "bin" / "python"))
    assert found.kind == PIPX
    assert found.command() == f"pipx inject memoryd {PKGS}"


def test_a_uv_tool_install_is_told_uv_pip_with_its_python(tmp_path: Path) -> None:
    venv = tmp_path / "uv" / "tools" / "memoryd"
    venv.mkdir(parents=True)
    (venv / "uv-receipt.toml").write_text("[tool]\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nuv = 0.5.0\n")
    py = str(venv / "bin" / "python")
    found = detect(venv, "/usr", py)
    assert found.kind == UV_TOOL
    assert found.command() == f"uv pip install --python {py} {PKGS}"


def test_a_venv_made_by_uv_has_no_pip_so_uv_pip(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nuv = 0.5.0\n")
    assert detect(tmp_path, "/usr", "/x/bin/python").kind == UV_VENV


def test_a_venv_like_make_setups_uses_its_own_pip(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    py = str(tmp_path / "bin" / "python")
    found = detect(tmp_path, "/usr", py)
    assert found.kind == VENV
    assert found.command() == f"{py} -m pip install {PKGS}"


def test_outside_any_environment_a_user_install() -> None:
    found = detect("/usr", "/usr", "/usr/bin/python3")
    assert found.kind == SYSTEM
    assert found.command() == f"/usr/bin/python3 -m pip install --user {PKGS}"


def test_the_message_names_the_missing_package_and_the_command(tmp_path: Path) -> None:
    (tmp_path / "pipx_metadata.json").write_text("{}")
    text = missing_ui_message("jinja2", detect(tmp_path, "/usr", "/p"))
    assert "'jinja2'" in text and f"pipx inject {tmp_path.name} " in text and "memoryd[ui]" not in text


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the test suite runs in a venv")
def test_this_test_venv_is_a_venv() -> None:
    assert detect().kind in (VENV, UV_VENV)
