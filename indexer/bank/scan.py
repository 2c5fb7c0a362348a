"""A small snapshot of a project, read within a fixed budget.

The budget (at most 10 files, at most 200 lines each) keeps a refresh cheap
and predictable on a large repository: only well-known manifest and README
files at the project's top level are read, in a fixed order, and parsing is
best-effort on the truncated text (a cut-off ``package.json`` falls back to
line matching). Reading never fails: a missing or unreadable file is skipped.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILES = 10
MAX_LINES = 200
_MAX_LINE_CHARS = 4000  # a minified one-line manifest must not blow the budget in bytes
CANDIDATES = ("README.md", "README.rst", "README.txt", "README", "pyproject.toml", "package.json",
              "Cargo.toml", "go.mod", "setup.cfg", "Makefile", "composer.json", "Gemfile", "requirements.txt")


@dataclass
class Snapshot:
    """What the scan learnt; every field may be empty. ``sources`` are the files read, in order."""

    name: str = ""
    summary: str = ""
    stack: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    readme: str = ""
    sources: list[str] = field(default_factory=list)


def read_head(path: Path, max_lines: int = MAX_LINES) -> str | None:
    """The first ``max_lines`` lines of a UTF-8 file (each capped), or None if unreadable."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            lines = []
            for i, line in enumerate(fh):
                if i >= max_lines:
                    break
                lines.append(line[:_MAX_LINE_CHARS])
            return "".join(lines)
    except OSError:
        return None


def scan_project(project: Path) -> Snapshot:
    """Scan ``project``'s top level: at most :data:`MAX_FILES` files × :data:`MAX_LINES` lines."""
    snap = Snapshot()
    present = {p.name.lower(): p for p in _children(project)}
    for name in CANDIDATES:
        if len(snap.sources) >= MAX_FILES:
            break
        path = present.get(name.lower())
        if path is None or (name.startswith("README") and snap.readme):
            continue
        text = read_head(path)
        if text is None:
            continue
        snap.sources.append(path.name)
        _PARSERS.get(name, _readme if name.startswith("README") else _ignore)(snap, name, text)
    return snap


def _children(project: Path) -> list[Path]:
    try:
        return sorted(p for p in project.iterdir() if p.is_file())
    except OSError:
        return []


def _ignore(snap: Snapshot, name: str, text: str) -> None:
    return None


def _readme(snap: Snapshot, name: str, text: str) -> None:
    snap.readme = name
    lines = text.splitlines()
    for line in lines:
        if line.startswith("# "):
            snap.name = snap.name or line[2:].strip()
            break
    paragraph: list[str] = []
    for line in lines:
        s = line.strip()
        if not s:
            if paragraph:
                break
            continue
        if s.startswith(("#", "<", "!", "[!", "```", "|", "---", "===")) or (s.startswith("[") and "](" in s):
            if paragraph:
                break
            continue
        paragraph.append(s)
    if paragraph:
        snap.summary = _cap(" ".join(paragraph), 300)


def _pyproject(snap: Snapshot, name: str, text: str) -> None:
    data = _toml(text)
    proj = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    snap.name = snap.name or str(proj.get("name") or _line_value(text, "name"))
    snap.summary = snap.summary or _cap(str(proj.get("description") or _line_value(text, "description")), 300)
    py = proj.get("requires-python")
    snap.stack.append(f"Python {py}".strip() if py else "Python")
    deps = proj.get("dependencies")
    if isinstance(deps, list):
        snap.dependencies += [re.split(r"[<>=!~;\[ ]", str(d), maxsplit=1)[0] for d in deps]


def _package_json(snap: Snapshot, name: str, text: str) -> None:
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    snap.name = snap.name or str(data.get("name") or _line_value(text, "name"))
    snap.summary = snap.summary or _cap(str(data.get("description") or _line_value(text, "description")), 300)
    snap.stack.append("Node.js")
    for key in ("dependencies", "devDependencies"):
        if isinstance(data.get(key), dict):
            snap.dependencies += list(data[key])
    if isinstance(data.get("scripts"), dict):
        snap.commands += [f"npm run {s}" for s in data["scripts"]]


def _cargo(snap: Snapshot, name: str, text: str) -> None:
    data = _toml(text)
    pkg = data.get("package", {}) if isinstance(data.get("package"), dict) else {}
    snap.name = snap.name or str(pkg.get("name") or "")
    snap.summary = snap.summary or _cap(str(pkg.get("description") or ""), 300)
    snap.stack.append("Rust")
    snap.commands += ["cargo build", "cargo test"]


def _gomod(snap: Snapshot, name: str, text: str) -> None:
    m = re.search(r"^go\s+(\S+)", text, re.M)
    snap.stack.append(f"Go {m.group(1)}" if m else "Go")
    snap.commands += ["go build ./...", "go test ./..."]


def _makefile(snap: Snapshot, name: str, text: str) -> None:
    targets = re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M)
    snap.commands += [f"make {t}" for t in dict.fromkeys(targets)]


def _simple(label: str) -> Any:
    def parse(snap: Snapshot, name: str, text: str) -> None:
        snap.stack.append(label)
    return parse


_PARSERS = {
    "pyproject.toml": _pyproject, "package.json": _package_json, "Cargo.toml": _cargo, "go.mod": _gomod,
    "Makefile": _makefile, "setup.cfg": _simple("Python"), "requirements.txt": _simple("Python"),
    "composer.json": _simple("PHP"), "Gemfile": _simple("Ruby"),
}


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _line_value(text: str, key: str) -> str:
    m = re.search(rf'^\s*"?{key}"?\s*[:=]\s*"([^"]+)"', text, re.M)
    return m.group(1) if m else ""


def _cap(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"
