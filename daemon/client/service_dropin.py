"""The drop-in ``memoryd service install`` writes: the daemon's flags, checked and quoted for systemd.

Why each rule exists (issue #28 item 9):

- ``--flags`` is split like a shell would (:func:`shlex.split`) and every word is then
  checked by ``memoryd run``'s own argparse parser, so a typo fails at install with
  the parser's message instead of at every start of the service.
- No word may hold a control character: a newline would end the ``ExecStart=`` line
  and let the rest of the word add a directive of its own (``ExecStartPre=…``).
- Words are written with systemd's quoting (systemd.service(5), "Command lines"): a
  word outside ``[A-Za-z0-9_@%+=:,./~-]`` goes in double quotes with ``\\`` and ``"``
  escaped (C escapes apply inside quotes); ``%`` is doubled (specifiers are expanded
  even inside quotes) and ``$`` too (``$FOO`` is environment substitution). So a ``"``
  or a ``;`` inside a word is one argument, never a split or a second command.
- Path values are written absolute with ``~`` expanded: systemd passes ``~`` through
  literally, and the daemon would look for a folder named ``~``.
- ``ReadWritePaths=`` names every root, the data dir and a moved socket's folder from
  the flags *and* the config they load, each with ``-`` (a missing one is skipped, not
  a start failure): under ``ProtectHome=read-only`` a root left out is read-only and
  every ``remember`` into it fails with EROFS. Paths the shipped unit already lists
  are left out.
- The flags are kept in the drop-in as one comment line (``# memoryd-flags: …``, the
  words joined by :func:`shlex.join`), so a later install without ``--flags`` keeps
  them, checked again, instead of silently dropping them.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from memoryd.indexer.errors import ConfigError, MemorydError

DROPIN_NAME = "10-memoryd-flags.conf"
FLAGS_MARK = "# memoryd-flags: "
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./~-]+")
# Writable in the shipped unit already (relative to the home directory, %h).
_SHIPPED_WRITABLE = (".local/state/memoryd", ".local/share/memoryd", ".cache/memoryd")


class ServiceError(MemorydError):
    """A unit could not be installed or removed (names the file, flag or command at fault)."""


def check_flags(text: str, run_parser: argparse.ArgumentParser) -> tuple[list[str], argparse.Namespace]:
    """``text`` as ``memoryd run`` words: split, checked by its parser, path values made absolute.

    Returns the words to write and the parsed flags; raises :class:`ServiceError`.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ServiceError(f"--flags cannot be split into words: {exc} (in {text[:200]!r})") from None
    for word in words:
        printable(word, "--flags")
    ns = _parse(run_parser, words)
    return canonical(run_parser, ns), ns


def printable(word: str, what: str) -> str:
    """``word`` if it may go into a unit file: valid UTF-8, no control character (no newline)."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        raise ServiceError(f"{what}: {word[:200]!r} is not valid UTF-8") from None
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in word):
        raise ServiceError(f"{what}: {word[:200]!r} holds a control character (a newline?); a unit file "
                           "line cannot carry it")
    return word


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """``parser.parse_args(words)``, its exit (an error, or ``--help``) turned into a ServiceError."""
    err = io.StringIO()
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            return parser.parse_args(words)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        why = lines[-1].removeprefix(f"{parser.prog}: error: ") if lines else "--help is not a flag for the service"
        flags = ", ".join(o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help")
        raise ServiceError(f"--flags is not a valid '{parser.prog}' command line: {why} "
                           f"('{parser.prog}' takes {flags})") from None


def canonical(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> list[str]:
    """The parsed flags as words again, long option names, path values absolute (``~`` expanded)."""
    words: list[str] = []
    for action in parser._actions:
        value = getattr(ns, action.dest, None)
        if not action.option_strings or action.dest == "help" or value is None or value == action.default:
            continue
        opt = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        if action.nargs == 0:  # a switch
            words.append(opt)
            continue
        for item in value if isinstance(value, list) else [value]:
            words += [opt, absolute(item) if action.type is Path else str(item)]
    return words


def absolute(path: Path | str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def writable_paths(ns: argparse.Namespace, env: Mapping[str, str]) -> list[Path]:
    """Roots, data dir and a configured socket's folder, from the flags and the config they name,
    less what the shipped unit already makes writable."""
    from memoryd.indexer import config as configmod  # only for install: the CLI's start stays light

    config = Path(absolute(ns.config)) if getattr(ns, "config", None) else None
    try:
        cfg = configmod.load(config, env)
        cfg = configmod.with_overrides(cfg, roots=getattr(ns, "root", None), data_dir=getattr(ns, "data_dir", None),
                                       socket=getattr(ns, "socket", None))
    except ConfigError as exc:
        raise ServiceError(f"the daemon could not start with these flags: {exc}") from None
    found = [*cfg.effective_roots, cfg.data_dir, *([cfg.socket_path.parent] if cfg.server.socket else [])]
    home = Path(absolute(env.get("HOME") or "~"))
    covered = [home / rel for rel in _SHIPPED_WRITABLE]
    out: list[Path] = []
    for path in found:
        if path not in out and not any(path == c or c in path.parents for c in covered):
            out.append(path)
    return out


def exec_word(word: str) -> str:
    """One word of an ``ExecStart=`` line, meaning exactly ``word`` to systemd."""
    text = printable(word, "ExecStart").replace("%", "%%").replace("$", "$$")
    if _PLAIN.fullmatch(word):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def path_word(path: Path) -> str:
    """One ``ReadWritePaths=`` entry: ``-PATH`` (skipped when missing), quoted when it holds a space."""
    text = printable(str(path), "ReadWritePaths")
    if any(c in text for c in "\"'\\"):
        raise ServiceError(f"cannot write {text[:200]!r} into ReadWritePaths= (it holds a quote or a backslash); "
                           "add it yourself: systemctl --user edit memoryd.service")
    entry = "-" + text.replace("%", "%%")
    return f'"{entry}"' if any(c.isspace() for c in entry) else entry


def dropin_text(exe: str, words: list[str], paths: list[Path]) -> str:
    """The drop-in: the flags (as a comment to keep, and as ``ExecStart=``), the writable paths."""
    lines = ["# Written by 'memoryd service install' (docs/systemd.md). A later install keeps these flags",
             "# unless it is given --flags; --flags '' removes them."]
    if words:
        lines.append(FLAGS_MARK + shlex.join(words))
    lines.append("[Service]")
    if words:
        lines += ["ExecStart=", f"ExecStart={exec_word(exe)} run {' '.join(exec_word(w) for w in words)}"]
    if paths:
        lines.append("ReadWritePaths=" + " ".join(path_word(p) for p in paths))
    if any("\n" in line or "\r" in line for line in lines):  # pragma: no cover - printable() refused them
        raise ServiceError("refusing to write a line break inside a drop-in line")
    return "\n".join(lines) + "\n"


def earlier_flags(dropin: Path) -> str:
    """The flags a drop-in of an earlier install holds ("" when none, or no drop-in)."""
    try:
        text = dropin.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceError(f"cannot read the earlier drop-in {dropin}: {exc}; give --flags (or --flags '')") from None
    lines = text.splitlines()
    for line in lines:
        if line.startswith(FLAGS_MARK):
            return line[len(FLAGS_MARK):]
    # A drop-in from before the mark: its words are on the ExecStart= line, quoted "…" with % doubled.
    runs = [line.split(" run ", 1)[1] for line in lines if line.startswith("ExecStart=") and " run " in line]
    return runs[-1].replace("%%", "%") if runs else ""
