"""How this memoryd was installed, and the exact command that adds packages to *its* environment.

The UI's dependencies are in the default install (docs/ui.md, "Install"), so they are missing only
from an install made with ``--no-deps``, an older memoryd, or an environment changed by hand. A
plain ``pip install`` is then the wrong advice more often than not: under pipx or ``uv tool`` it
installs into another Python, and memoryd is not on PyPI. What each installer leaves in the
environment's folder tells them apart: pipx writes ``pipx_metadata.json``, ``uv tool`` writes
``uv-receipt.toml``, a venv has a ``pyvenv.cfg`` (``uv = …`` in it when uv made it, which leaves
no pip inside). Import-light: the CLI imports it only when ``memoryd ui`` fails to start.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

#: What the UI imports beyond the daemon's own needs; the same specifiers as pyproject's dependencies
#: (tests/ui/test_ui_install.py checks that they stay alike).
UI_REQUIREMENTS = ("jinja2>=3.1,<4", "starlette>=0.40,<2", "uvicorn>=0.30,<1", "python-multipart>=0.0.9",
                   "httptools>=0.6,<1")

PIPX, UV_TOOL, UV_VENV, VENV, SYSTEM = "pipx", "uv tool", "uv venv", "venv", "system"


@dataclass(frozen=True)
class Install:
    """Which installer made the environment at ``prefix``, and the command adding ``packages`` to it."""

    kind: str
    prefix: Path
    python: str

    def command(self, packages: tuple[str, ...] = UI_REQUIREMENTS) -> str:
        pkgs = " ".join(shlex.quote(p) for p in packages)
        if self.kind == PIPX:
            return f"pipx inject {shlex.quote(self.prefix.name)} {pkgs}"
        if self.kind in (UV_TOOL, UV_VENV):
            return f"uv pip install --python {shlex.quote(self.python)} {pkgs}"
        if self.kind == VENV:
            return f"{shlex.quote(self.python)} -m pip install {pkgs}"
        return f"{shlex.quote(self.python)} -m pip install --user {pkgs}"


def detect(prefix: str | Path = sys.prefix, base_prefix: str | Path = sys.base_prefix,
           python: str = sys.executable) -> Install:
    """The installer of the environment at ``prefix`` (this interpreter's by default)."""
    where = Path(prefix)
    if (where / "pipx_metadata.json").is_file():
        return Install(PIPX, where, python)
    if (where / "uv-receipt.toml").is_file():
        return Install(UV_TOOL, where, python)
    if Path(prefix) != Path(base_prefix):
        return Install(UV_VENV if _made_by_uv(where / "pyvenv.cfg") else VENV, where, python)
    return Install(SYSTEM, where, python)


def _made_by_uv(cfg: Path) -> bool:
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.split("=", 1)[0].strip() == "uv" for line in text.splitlines())


def missing_ui_message(missing: str, install: Install | None = None) -> str:
    """What ``memoryd ui`` prints when a dependency of the page cannot be imported."""
    install = install or detect()
    return (f"memoryd ui: the page's package {missing!r} is missing from this memoryd's environment "
            f"({install.kind} at {install.prefix}); add what the page needs with:\n  {install.command()}")
