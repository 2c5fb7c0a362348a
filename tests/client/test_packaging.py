"""The wheel: only ``memoryd`` at top level, everything a pipx user needs inside, python-daemon beside it.

The source tree keeps its top-level folders (``daemon/``, ``indexer/``, ``config/``,
``systemd/``, ``editors/``); ``pyproject.toml`` maps them under ``memoryd.``. These tests
build the real wheel and look inside it. The full install into a clean venv (with
its dependencies from the package index) is ``scripts/wheel_smoke.sh``, run by CI.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


#: What a build must not see: a stale ``build/lib`` in the checkout would put modules that no
#: longer exist into the wheel.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src, out = tmp_path_factory.mktemp("src") / "memoryd", tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO, src, ignore=NOT_SOURCE, symlinks=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, timeout=300, capture_output=True)
    return next(out.glob("memoryd-*.whl"))


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_only_memoryd_at_top_level(wheel: Path) -> None:
    names = _names(wheel)
    tops = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert tops == {"memoryd"}
    with zipfile.ZipFile(wheel) as z:
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert z.read(top_level).decode().split() == ["memoryd"]


def test_the_wheel_holds_exactly_the_source_modules(wheel: Path) -> None:
    in_wheel = {n for n in _names(wheel) if n.endswith(".py")}
    expected = {f"memoryd/{p.relative_to(REPO).as_posix()}" for folder in ("daemon", "indexer")
                for p in (REPO / folder).rglob("*.py")}
    expected |= {f"memoryd/{p.name}" for p in (REPO / "src/memoryd").glob("*.py")}
    expected |= {f"memoryd/{d}/__init__.py" for d in ("config", "systemd", "editors")}
    expected |= {f"memoryd/config/agents/{p.name}" for p in (REPO / "config/agents").glob("*.py")}  # scripts, as data
    assert in_wheel == expected, (sorted(in_wheel - expected), sorted(expected - in_wheel))


def test_every_package_folder_is_declared() -> None:
    """A new subpackage must be added to ``[tool.setuptools] packages`` (the mapping is explicit)."""
    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    for folder in ("daemon", "indexer"):
        for init in (REPO / folder).rglob("__init__.py"):
            dotted = ".".join(init.parent.relative_to(REPO).parts)
            assert f"memoryd.{dotted}" in declared, f"memoryd.{dotted} is not in pyproject's package list"


@pytest.mark.parametrize("data", ["memoryd/config/memoryd.toml", "memoryd/systemd/memoryd.service",
                                  "memoryd/systemd/memoryd.socket", "memoryd/editors/memoryd.vim",
                                  "memoryd/editors/memoryd.el", "memoryd/config/agents/mcp.json",
                                  "memoryd/config/agents/memoryd-context-hook.py",
                                  "memoryd/daemon/ui/static/favicon.svg"])
def test_user_files_ship_as_package_data(wheel: Path, data: str) -> None:
    assert data in _names(wheel)


def test_the_ui_needs_no_extra(wheel: Path) -> None:
    """pipx, uv tool and make setup install no extra: the page's dependencies are plain Requires-Dist."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in _names(wheel) if n.endswith(".dist-info/METADATA"))).decode()
    plain = {line.split(":", 1)[1].strip().split(";")[0] for line in meta.splitlines()
             if line.startswith("Requires-Dist:") and "extra ==" not in line}
    names = {re.split(r"[<>=!~\[ ]", p, maxsplit=1)[0].lower() for p in plain}
    assert {"jinja2", "starlette", "uvicorn", "python-multipart", "httptools"} <= names


def test_python_daemon_imports_beside_memoryd(wheel: Path, tmp_path: Path) -> None:
    """python-daemon owns the name ``daemon``; memoryd's wheel must neither shadow nor overwrite it."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, timeout=300, capture_output=True)
    assert not (target / "daemon").exists() and not (target / "indexer").exists()
    code = ("import daemon, memoryd.daemon.cli as cli; "
            "assert hasattr(daemon, 'DaemonContext'), daemon.__file__; print(cli.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().startswith(str(target))


def test_metadata_names_the_licence_and_ships_its_text(wheel: Path) -> None:
    names = _names(wheel)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "Classifier: Operating System :: POSIX :: Linux" in meta
