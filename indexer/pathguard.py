"""The one path resolver: every path or path prefix a request names goes through here.

Requests name files as text (``get``, ``reindex``, ``forget``, ``path_prefix``);
the file system names them as bytes, through symlinks, ``..`` and hard links.
Access must be decided on what a name *reaches*, not on how it is spelt, so
this module turns request text into:

* a **checked** path: valid UTF-8, no NUL, every component at most
  :data:`MAX_NAME_BYTES` bytes and the whole at most :data:`MAX_PATH_BYTES`
  (the kernel's own limits: beyond them every call fails, and such a name is
  an attack or a bug, never a memory), no ``..`` component (a ``..`` is how a
  name leaves the folder it seems to be in; memory paths never need one);
* a **located** path: the configured root it lies under and its
  root-relative POSIX path, as spelt (``.`` and empty components dropped);
* a **resolved** path (:class:`Resolved`): the same after following every
  symlink, located again among the roots (``None`` outside all of them), plus
  the target's link count, so that callers can refuse a hard link.

Who may read what is decided in :mod:`memoryd.indexer.access` on a
:class:`Resolved`; this module only answers "where does this name lead".
Refusals are :class:`PathRefused` (a :class:`~memoryd.indexer.errors.BadTarget`),
whose message names the path (shortened) and the rule.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memoryd.indexer.errors import BadTarget

MAX_NAME_BYTES = 255  #: one path component, in UTF-8 bytes (NAME_MAX)
MAX_PATH_BYTES = 4096  #: a whole path, in UTF-8 bytes (PATH_MAX)


class PathRefused(BadTarget):
    """A request path that is malformed or would leave the memory roots."""


class OutsideRoots(PathRefused):
    """A well-formed path that does not lie (or does not resolve) inside any memory root."""


def shown(raw: str) -> str:
    """``raw`` for an error message: shortened, control characters and NULs escaped."""
    text = raw if len(raw) <= 120 else f"{raw[:100]}…({len(raw)} characters)"
    return ascii(text) if any(ord(c) < 32 or c == "\x7f" for c in text) else repr(text)


def check_text(raw: str, what: str = "path") -> str:
    """``raw`` if it is a sane path text; else :class:`PathRefused` naming the rule it breaks."""
    if "\x00" in raw:
        raise PathRefused(f"{what} {shown(raw)}: contains a NUL byte")
    try:
        data = raw.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused(f"{what} {shown(raw)}: is not valid UTF-8 (lone surrogate)") from None
    if len(data) > MAX_PATH_BYTES:
        raise PathRefused(f"{what} {shown(raw)}: is {len(data)} bytes long; the limit is {MAX_PATH_BYTES}")
    for part in raw.split("/"):
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathRefused(f"{what} {shown(raw)}: has a component of {len(part.encode('utf-8'))} bytes; "
                              f"the limit is {MAX_NAME_BYTES}")
        if part == "..":
            raise PathRefused(f"{what} {shown(raw)}: '..' components are refused")
    return raw


def normalize(raw: str, what: str = "path") -> str:
    """A checked path with ``.`` and empty components dropped (``/`` kept in front of an absolute path)."""
    check_text(raw, what)
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    return ("/" if raw.startswith("/") else "") + "/".join(parts)


@dataclass(frozen=True)
class Resolved:
    """Where a root-relative name leads.

    ``root``/``rel``: the name as spelt; ``real_root``/``real_rel``: where it resolves
    (symlinks followed), None when that is outside every root. ``links``: the hard
    link count of an existing regular file (0 when absent or not a regular file).
    """

    root: Path
    rel: str
    real_root: Path | None
    real_rel: str | None
    exists: bool
    is_dir: bool
    links: int

    @property
    def inside(self) -> bool:
        return self.real_root is not None

    @property
    def real_path(self) -> Path:
        """The resolved file (only when :attr:`inside`)."""
        if self.real_root is None or self.real_rel is None:
            raise OutsideRoots(f"{shown(self.rel)}: resolves outside every memory root")
        return self.real_root / self.real_rel if self.real_rel else self.real_root


class PathGuard:
    """The configured roots and the questions asked about request paths. Immutable, no I/O at construction
    beyond resolving the roots themselves."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots: list[Path] = list(dict.fromkeys(Path(os.path.abspath(r)) for r in roots))
        given = [(str(r), r) for r in self.roots]
        real = [(os.path.realpath(r), r) for r in self.roots]
        self._real = sorted(real, key=lambda p: -len(p[0]))
        self._all = sorted(set(given + real), key=lambda p: -len(p[0]))

    # -- locating names ---------------------------------------------------------

    def locate_absolute(self, path: str) -> tuple[Path, str] | None:
        """(root, rel) of a normalized absolute path lying under (or at) a root, as configured or resolved."""
        return _under(self._all, path, allow_root=True)

    def candidates(self, raw: str, what: str = "path") -> list[tuple[Path, str]]:
        """(root, rel) pairs a request path may name: absolute → its root; relative → every root holding it.

        Raises :class:`PathRefused` for malformed text. An empty list: no root holds it.
        """
        norm = normalize(raw, what)
        if norm.startswith("/"):
            loc = self.locate_absolute(norm)
            return [loc] if loc else []
        return [(r, norm) for r in self.roots if _lexists(r / norm if norm else r)]

    # -- resolving ----------------------------------------------------------------

    def resolve(self, root: Path, rel: str, folders: dict[str, str] | None = None) -> Resolved:
        """Follow every symlink of ``root/rel`` and locate the result among the roots.

        ``folders``, when given, memoizes resolved folders across calls (a search checks the files of
        all its candidates; a folder link changed meanwhile is seen by the next request's fresh memo).
        """
        path = os.path.join(root, rel) if rel else os.fspath(root)
        try:
            real, st = self._realpath(path, folders)
        except (OSError, ValueError):  # a loop or a name the kernel refuses: it leads nowhere we serve
            return Resolved(root, rel, None, None, exists=False, is_dir=False, links=0)
        real_root, real_rel = _under(self._real, real, allow_root=True) or (None, None)
        if st is None:
            return Resolved(root, rel, real_root, real_rel, exists=False, is_dir=False, links=0)
        links = st.st_nlink if stat.S_ISREG(st.st_mode) else 0
        return Resolved(root, rel, real_root, real_rel, exists=True, is_dir=stat.S_ISDIR(st.st_mode), links=links)

    @staticmethod
    def _realpath(path: str, folders: dict[str, str] | None) -> tuple[str, os.stat_result | None]:
        """``os.path.realpath`` and the target's stat (None: it does not exist).

        With ``folders``, the parent's resolution is reused and a file that is no link costs one
        ``lstat`` (instead of one per path component and a ``stat``).
        """
        if folders is not None:
            try:
                lst: os.stat_result | None = os.lstat(path)
            except OSError:  # absent, or a name the kernel refuses: the full resolution below decides
                lst = None
            if lst is not None and not stat.S_ISLNK(lst.st_mode):
                parent, name = os.path.split(path)
                if parent not in folders:
                    folders[parent] = os.path.realpath(parent)
                return os.path.join(folders[parent], name), lst
        real = os.path.realpath(path)
        try:
            return real, os.stat(real)
        except OSError:  # absent, a link loop, unreadable: nothing to serve there
            return real, None

    def resolve_parent(self, root: Path, rel: str) -> tuple[Path, str] | None:
        """``rel`` with its folders resolved and its last name kept: how a walk of the roots names the file.

        None when the folders resolve outside every root.
        """
        head, _, name = rel.rpartition("/")
        parent = self.resolve(root, head)
        if parent.real_root is None or parent.real_rel is None or not name:
            return None
        return parent.real_root, f"{parent.real_rel}/{name}" if parent.real_rel else name


def _under(prefixes: Sequence[tuple[str, Path]], path: str, allow_root: bool = False) -> tuple[Path, str] | None:
    """(configured root, rel) for the longest prefix ``path`` lies under; exact-case component match."""
    for prefix, root in prefixes:
        if path == prefix and allow_root:
            return root, ""
        base = prefix if prefix.endswith("/") else prefix + "/"
        if path.startswith(base) and len(path) > len(base):
            return root, path[len(base):]
    return None


def _lexists(path: Path) -> bool:
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):
        return False
