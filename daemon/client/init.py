"""``memoryd init``: the config file a fresh machine lacks, in one command.

``memoryd config > ~/.config/memoryd/memoryd.toml`` fails where the folder does
not exist yet; ``init`` creates it, writes the shipped commented config
(:func:`memoryd.daemon.client.cli_setup.default_config_text`, the same text
``memoryd config`` prints) with the roots given, checks the result loads as the
daemon will load it, and never replaces an existing file without ``--force``
(the old one is then kept as ``memoryd.toml.bak``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from memoryd.daemon.client.cli_setup import default_config_text
from memoryd.daemon.client.setup_files import Change, SetupError, read_text
from memoryd.indexer.errors import ConfigError

ROOTS_LINE = "roots = []\n"


def config_text(roots: Sequence[Path]) -> str:
    """The shipped config with ``[watch] roots`` set to ``roots`` (empty: the built-in default folder)."""
    text = default_config_text()
    if ROOTS_LINE not in text:  # pragma: no cover - guarded by a test on the shipped file
        raise SetupError("the shipped memoryd.toml has no 'roots = []' line to fill in")
    if not roots:
        return text
    listed = ", ".join(json.dumps(str(r), ensure_ascii=False) for r in roots)
    return text.replace(ROOTS_LINE, f"roots = [{listed}]\n", 1)


def absolute_roots(raw: Sequence[str | Path], cwd: Path) -> list[Path]:
    """Roots as the config will hold them: ``~`` expanded, relative to ``cwd`` made absolute, no repeats."""
    out: list[Path] = []
    for item in raw:
        text = str(item).strip()
        if not text:
            continue
        path = Path(os.path.normpath(cwd / Path(text).expanduser()))
        if path not in out:
            out.append(path)
    return out


def parse_answer(answer: str) -> list[str]:
    """The roots typed at the prompt: comma-separated (a path may hold spaces)."""
    return [part.strip() for part in answer.split(",") if part.strip()]


def plan_init(path: Path, roots: Sequence[Path], force: bool, env: Mapping[str, str]) -> Change:
    """The config file to write; :class:`SetupError` when one exists and ``force`` is off, or the
    text would not load (checked with the daemon's own loader before anything is written)."""
    old = read_text(path)
    if old is not None and not force:
        raise SetupError(f"{path} already exists; nothing was changed (--force replaces it, keeping the old one "
                         f"as {path.name}.bak; 'memoryd config' prints the default to compare)")
    text = config_text(roots)
    check_loads(text, env)
    return Change(path, old, text, "the memoryd config", mode=0o600)


def check_loads(text: str, env: Mapping[str, str]) -> None:
    """Load ``text`` with :func:`memoryd.indexer.config.load`, as the daemon would; :class:`SetupError` if not."""
    from memoryd.indexer import config as configmod

    with tempfile.TemporaryDirectory(prefix="memoryd-init-") as tmp:
        probe = Path(tmp) / "memoryd.toml"
        probe.write_text(text, encoding="utf-8")
        try:
            configmod.load(probe, env)
        except ConfigError as exc:
            raise SetupError(f"the config would not load: {str(exc).replace(str(probe), 'memoryd.toml')}") from None


def describe_roots(roots: Sequence[Path], default_root: Path, create: bool = True) -> list[str]:
    """What ``init`` says about the roots it wrote; a missing root is created (``create``), as the daemon
    creates its default one, so the next ``memoryd run`` finds it."""
    if not roots:
        return [f"roots: none given, so the built-in default {default_root} (created with an example note on "
                "the first start)"]
    out = []
    for root in roots:
        if root.is_dir():
            out.append(f"root: {root}")
        elif create:
            root.mkdir(parents=True, exist_ok=True)
            out.append(f"root: {root} (created, empty)")
        else:
            out.append(f"root: {root} (does not exist yet)")
    return out
