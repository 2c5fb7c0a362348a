"""Which files under a root are memory files: include/exclude globs plus editor-temp rules.

Pure (no I/O): every function works on POSIX paths *relative to their root*
(``notes/a.md``, never absolute, never ``./``), so the watcher, the start-up
reconcile and the ``reindex`` request all agree on what is indexed.

Glob rules (``fnmatch`` syntax, case-sensitive; ``*`` also crosses ``/``):

- a pattern without ``/`` is matched against the file *name* when it is an
  include (``*.md`` matches at any depth) and against *every path component*
  when it is an exclude (``node_modules`` excludes that whole tree);
- a pattern with ``/`` is matched against the path starting at any component
  boundary (``.git/*`` excludes everything under any ``.git`` directory, at any
  depth); a leading ``/`` anchors it at the root instead (``/drafts/*``); a
  trailing ``/`` means "everything below" (``build/`` = ``build/*``); ``**/``
  may also match nothing (``a/**/b.md`` matches ``a/b.md``);
- an empty include list includes every file that is not rejected.

Whatever the globs say, editor temp/swap/backup files are never indexed (see
:func:`is_editor_temp`), and neither are hidden *files* (name starting with
``.``): editors and sync tools write their temporaries under dot names
(``.x.md.swp``, ``.goutputstream-*``, ``.#x.md``), and a stray half-written dot
file is worse than a missed one.

Hidden *directories* are skipped too, unless ``include`` names them: tools keep
caches, state and copies there (``.venv``, ``.cache``, ``.stversions``, ``.git``),
and their Markdown is not the user's memory. An include pattern with ``/`` whose
directory part holds a dot component (``.memory/*.md``, ``/.cursor/rules/*.md``,
``**/.notes/*.md``) opts that directory in: it is walked, and a file below a
hidden directory is indexed only when such a pattern matches its path (a name
pattern like ``*.md`` alone never reaches into one). The root itself may be a
hidden directory: only components below it count.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from memoryd.indexer.errors import ConfigError

# Vim (swap files, its ``4913`` write probe, ``~`` backups), Emacs (``.#`` lock
# links, ``#autosave#``), JetBrains safe-write, LibreOffice/MS Office locks, and
# the generic ``.tmp`` used by atomic "write temp then rename over" saves.
_TEMP_GLOBS = (
    ".*.sw?", "*.swp", "*.swx", "*~", "4913", ".#*", "#*#", "*.tmp", ".*.tmp",
    "*___jb_tmp___", "*___jb_old___", ".~*", "~$*",
)  # fmt: skip
_TEMP_RE = re.compile("|".join(fnmatch.translate(g) for g in _TEMP_GLOBS))


def is_editor_temp(name: str) -> bool:
    """True when a file *name* (not a path) is an editor temp, swap, lock or backup file."""
    return _TEMP_RE.match(name) is not None


def _compile(pattern: str, key: str) -> re.Pattern[str]:
    """One glob as a regex over a relative path (or over one name, for patterns without ``/``)."""
    if not pattern or pattern.strip() != pattern:
        raise ConfigError(f"config '{key}' has an invalid glob {pattern!r}")
    if pattern.endswith("/"):
        pattern += "*"
    if "/" not in pattern:
        return re.compile(fnmatch.translate(pattern))
    anchored = pattern.startswith("/")
    body = pattern.lstrip("/")
    variants = {body, body.replace("**/", "")}
    alternatives = "|".join(f"(?:{fnmatch.translate(v)})" for v in sorted(variants))
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(f"(?s:{prefix})(?:{alternatives})")


def _hidden(dirs: Sequence[str]) -> bool:
    return any(d.startswith(".") for d in dirs)


def _dot_dirs(pattern: str) -> list[str]:
    """The hidden directory names (globs) in an include pattern's directory part: ``.memory``
    for ``.memory/*.md``, ``/.memory/*.md`` and ``a/.memory/``; none for ``*.md``."""
    if "/" not in pattern:
        return []
    parts = pattern.strip("/").split("/")
    dirs = parts if pattern.endswith("/") else parts[:-1]
    return [d for d in dirs if d.startswith(".") and d not in (".", "..")]


class PathFilter:
    """Decides which relative paths are memory files.

    ``include``/``exclude`` are the ``watch.include``/``watch.exclude`` globs;
    a bad glob raises :class:`ConfigError` naming the key. Instances are
    immutable and thread-safe.
    """

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        inc = [(p, _compile(p, "watch.include")) for p in self.include]
        exc = [(p, _compile(p, "watch.exclude")) for p in self.exclude]
        self._inc_name = [r for p, r in inc if "/" not in p]
        self._inc_path = [r for p, r in inc if "/" in p]
        self._exc_name = [r for p, r in exc if "/" not in p]
        self._exc_path = [r for p, r in exc if "/" in p]
        # Include patterns that name a hidden directory, and those directories' name globs.
        dotted = [(p, r) for p, r in inc if _dot_dirs(p)]
        self._dot_inc_path = [r for _, r in dotted]
        self._dot_dirs = [re.compile(fnmatch.translate(d)) for p, _ in dotted for d in _dot_dirs(p)]

    def __call__(self, rel_path: str) -> bool:
        """True when the file at ``rel_path`` should be indexed."""
        if not self.accept_delete(rel_path):
            return False
        if _hidden(rel_path.split("/")[:-1]):
            return any(r.match(rel_path) for r in self._dot_inc_path)
        if not (self._inc_name or self._inc_path):
            return True
        name = rel_path.rpartition("/")[2]
        return any(r.match(name) for r in self._inc_name) or any(r.match(rel_path) for r in self._inc_path)

    def accept_delete(self, rel_path: str) -> bool:
        """True when a file at ``rel_path`` could be in the index, whatever ``include`` says.

        Deletes skip the include globs (a file indexed under an older config
        must still leave the index) but not the exclude, hidden-directory or temp
        rules, so that ``git gc`` in ``.git`` or a swap file coming and going is not
        reported. (A file in a hidden directory indexed by an older memoryd leaves
        the index at the next reconcile, which drops every indexed file it does not
        find.)
        """
        parts = rel_path.split("/")
        name = parts[-1]
        if not name or name.startswith(".") or is_editor_temp(name) or not self._dot_dirs_open(parts[:-1]):
            return False
        return not self._excluded(rel_path, parts)

    def accept_dir(self, rel_dir: str) -> bool:
        """True when the directory at ``rel_dir`` may hold memory files (walk into it)."""
        parts = rel_dir.split("/")
        return self._dot_dirs_open(parts) and not self._excluded(rel_dir + "/", parts)

    def _dot_dirs_open(self, dirs: Sequence[str]) -> bool:
        """Every hidden directory among ``dirs`` is one that an include pattern names."""
        return all(any(r.match(d) for r in self._dot_dirs) for d in dirs if d.startswith("."))

    def _excluded(self, rel_path: str, parts: Sequence[str]) -> bool:
        if any(r.match(part) for r in self._exc_name for part in parts):
            return True
        return any(r.match(rel_path) for r in self._exc_path)

    def __repr__(self) -> str:
        return f"PathFilter(include={self.include!r}, exclude={self.exclude!r})"
