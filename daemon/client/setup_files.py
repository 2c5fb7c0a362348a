"""Editing a user's config files for ``memoryd init`` and ``memoryd agents install``: plan, then write.

Every change is computed first, as a :class:`Change` holding the file's old and
new text, so ``--dry-run`` shows exactly what a real run writes, and a refusal
(a file that fails to parse) happens before the first write. A real run writes
each file atomically (:func:`memoryd.indexer.atomic.atomic_write_bytes`: a crash
leaves the old file or the new one) and copies the old file to ``NAME.bak``
once, before memoryd first changes it: an existing ``.bak`` is kept, so the copy
is always of the file as it was before memoryd touched it.

Edits keep everything they do not own. JSON is re-serialised with the file's own
indentation (the ``json`` module cannot keep comments, and JSON has none); TOML is
edited as text, one table at a time, and the result parsed again to prove that
only that table changed (:func:`replace_toml_table`): comments, order and
formatting of the rest survive byte for byte, without a round-trip library.
Markdown instructions go in a block between two marker lines
(:func:`replace_marked_block`), so an uninstall removes that block and nothing else.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.indexer.atomic import atomic_write_bytes
from memoryd.indexer.errors import MemorydError


class SetupError(MemorydError):
    """A file memoryd would edit cannot be read or parsed, or holds what memoryd cannot edit safely.

    Nothing has been written when it is raised: every file is planned before the first write.
    """


@dataclass(frozen=True)
class Change:
    """One file: its text now (None: absent) and after the change (None: remove it)."""

    path: Path
    old: str | None
    new: str | None
    what: str  # for the report: "the MCP server memoryd", "the UserPromptSubmit hook", ...
    mode: int = 0o644

    @property
    def changed(self) -> bool:
        return self.old != self.new


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist; :class:`SetupError` when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"cannot read {path}: {exc}; nothing was changed") from None


# -- JSON ------------------------------------------------------------------------------------


def load_json_object(path: Path, text: str | None) -> dict[str, Any]:
    """``text`` (the file at ``path``) as a JSON object ({} when absent or blank); refuses anything else."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SetupError(f"{path} is not valid JSON ({exc}); fix it or move it away, then run this again "
                         "(nothing was changed)") from None
    if not isinstance(data, dict):
        raise SetupError(f"{path} holds JSON that is not an object; nothing was changed")
    return data


def dump_json_like(data: dict[str, Any], old: str | None) -> str:
    """``data`` as JSON indented as ``old`` was (two spaces for a new file), with a final newline."""
    indent: int | str = 2
    if old:
        m = re.search(r"^\{\s*\n([ \t]+)\S", old)
        if m:
            indent = len(m.group(1)) if " " in m.group(1) else m.group(1)
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def child(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    """``data[key]`` as an object, created when absent; :class:`SetupError` when it is something else."""
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise SetupError(f"{path}: {key!r} is a {type(value).__name__}, not an object; nothing was changed")
    return value



def place_command_hook(hooks: dict[str, Any], event: str, ours: dict[str, Any] | None,
                       is_ours: Callable[[Any], bool], path: Path) -> None:
    """In a Claude Code ``hooks`` object: put ``ours`` where our old command hook of ``event`` was (the
    user's order of hooks stays), or last when there was none; ``ours`` None removes ours. Every other
    hook is kept as it is; groups and the event left empty by the removal go."""
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise SetupError(f"{path}: hooks.{event} is not a list; nothing was changed")
    placed = False
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list):
            continue
        kept = []
        for h in inner:
            if isinstance(h, dict) and is_ours(h.get("command", "")):
                if ours is not None and not placed:
                    kept.append(ours)
                    placed = True
                continue
            kept.append(h)
        group["hooks"] = kept
    groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
    if ours is not None and not placed:
        groups.append({"hooks": [ours]})
    if hooks.get(event) == []:
        del hooks[event]

# -- TOML ------------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_LINE = re.compile(r"^\s*[^#\s]")


def _header_name(line: str) -> str | None:
    m = _HEADER.match(line)
    return m.group(1).replace(" ", "").replace('"', "") if m else None


def _table_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """Lines ``[start, end)`` of table ``name`` and its sub-tables; trailing comments and blanks stay outside
    (they usually belong to the next table)."""
    start = next((i for i, line in enumerate(lines) if _header_name(line) == name), None)
    if start is None:
        return None
    end = len(lines)
    for i in range(start + 1, len(lines)):
        other = _header_name(lines[i])
        if other is not None and other != name and not other.startswith(name + "."):
            end = i
            break
    while end > start + 1 and not _KEY_LINE.match(lines[end - 1]):
        end -= 1
    return start, end


def _dig(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _without(data: dict[str, Any], dotted: str) -> dict[str, Any]:
    """A copy of ``data`` less the table at ``dotted`` (and parents it leaves empty)."""
    head, _, rest = dotted.partition(".")
    out = dict(data)
    if not rest:
        out.pop(head, None)
        return out
    if isinstance(out.get(head), dict):
        inner = _without(out[head], rest)
        if inner:
            out[head] = inner
        else:
            out.pop(head)
    return out


def parse_toml(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{path} is not valid TOML ({exc}); fix it, then run this again (nothing was changed)") \
            from None


def replace_toml_table(path: Path, text: str | None, name: str, block: str | None) -> str | None:
    """``text`` with table ``name`` (``mcp_servers.memoryd``) replaced by ``block`` (None: removed).

    A text edit, checked by parsing: the result must equal the old document with only that table
    changed, else :class:`SetupError` (e.g. a table defined inline, ``mcp_servers = { memoryd = … }``, which
    only the user should rewrite). Returns the new text; None when the file would be left empty.
    """
    before = parse_toml(path, text)
    lines = (text or "").splitlines(keepends=True)
    span = _table_span(lines, name)
    if span is None and _dig(before, name) is not None:
        raise SetupError(f"{path} defines {name} without a [{name}] header (inline or dotted keys); edit it "
                         "yourself, or remove it and run this again (nothing was changed)")
    if span is not None:
        lines[span[0]:span[1]] = [block] if block else []
    elif block:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines += ["\n", block] if lines and lines[-1].strip() else [block]
    new = "".join(lines)
    if block is None:
        new = re.sub(r"\n{3,}", "\n\n", new).strip("\n") + "\n" if new.strip() else ""
    after = parse_toml(path, new)
    table = _dig(tomllib.loads(block), name) if block else None
    if _without(after, name) != _without(before, name) or _dig(after, name) != table:
        raise SetupError(f"{path}: cannot edit [{name}] as text without changing other keys; edit it yourself "
                         "(nothing was changed)")
    return new or None


# -- Markdown --------------------------------------------------------------------------------


def marked_block(body: str, begin: str, end: str) -> str:
    return f"{begin}\n{body.rstrip()}\n{end}\n"


def replace_marked_block(text: str | None, begin: str, end: str, block: str | None) -> str | None:
    """``text`` with the lines from ``begin`` to ``end`` replaced by ``block`` (None: removed; appended when
    absent). Returns None when nothing else is left in the file."""
    old = text or ""
    pattern = re.compile(rf"(?:\n)?^{re.escape(begin)}$.*?^{re.escape(end)}$\n?", re.M | re.S)
    m = pattern.search(old)
    if m:  # the match starts at the newline before the block when there is one: the blank line install added
        lead = "\n" if block and old[m.start():m.start() + 1] == "\n" else ""
        new = old[:m.start()] + lead + (block or "") + old[m.end():]
    elif block:
        sep = "" if not old.strip() else ("\n" if old.endswith("\n") else "\n\n")
        new = (old if old.strip() else "") + sep + block
    else:
        new = old
    return new if new.strip() else None


# -- writing ---------------------------------------------------------------------------------


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def apply(changes: list[Change], say: Callable[[str], None], dry_run: bool = False, install: bool = True) -> int:
    """Write (or, ``dry_run``, only describe) every change; returns how many files changed.

    A file left as it is reads differently for an uninstall (``install`` False): "already as memoryd
    writes it" there told the user memoryd's part was still in place when nothing of it was left."""
    done = 0
    for c in changes:
        if not c.changed:
            say(f"unchanged {c.path} ({c.what}: already as memoryd writes it)" if install
                else f"nothing to remove in {c.path} ({c.what}: not there)")
            continue
        verb = "remove" if c.new is None else ("create" if c.old is None else "update")
        if dry_run:
            say(f"would {verb} {c.path} ({c.what})")
            say(diff(c))
            continue
        _write(c, say, verb)
        done += 1
    return done


def diff(c: Change) -> str:
    """The change as a unified diff (what ``--dry-run`` shows), indented under its line."""
    lines = difflib.unified_diff((c.old or "").splitlines(keepends=True), (c.new or "").splitlines(keepends=True),
                                 str(c.path) if c.old is not None else "/dev/null",
                                 str(c.path) if c.new is not None else "/dev/null", n=2)
    return "".join(f"    {line}" if line.endswith("\n") else f"    {line}\n" for line in lines).rstrip("\n")


def _write(c: Change, say: Callable[[str], None], verb: str) -> None:
    if c.old is not None and c.new is not None:  # a file removed held only what memoryd wrote: no copy needed
        bak = backup_path(c.path)
        if not bak.exists():
            shutil.copy2(c.path, bak)
            say(f"saved the old {c.path.name} as {bak}")
    if c.new is None:
        c.path.unlink(missing_ok=True)
        say(f"removed {c.path} ({c.what})")
        return
    c.path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(c.path, c.new.encode("utf-8"), new_mode=c.mode)
    say(f"{verb}d {c.path} ({c.what})")
