"""Synonym and alias expansion for the keyword leg: 数据库 ↔ database ↔ DB.

BM25 matches words, so a note that says "数据库" is invisible to a query that
says "database", and "k8s" to "Kubernetes"; the vector leg bridges some of
these, not abbreviations or every language pair. A small table of groups of
interchangeable names closes the gap: when a query names one alias of a group,
the keyword leg also searches the others.

The table is the built-in ``synonyms.txt`` shipped with this package plus, when
``search.synonyms_path`` names one, a user file in the same format::

    # a comment
    database, DB, 数据库
    pull request, PR, merge request

one group per line, names separated by ``,``, ``，`` or ``、``. Each name is
analysed as the index analyses text (:mod:`memoryd.indexer.search.keyword`): a word
becomes its stem, several words a phrase (matched as adjacent words), a Chinese
name its characters' bigrams. A Chinese name is recognised in a query as a
substring; any other name when all its analysed terms are among the query's.

Expansion is bounded: at most ``MAX_ADDED_TERMS`` terms are added, and never
past :data:`memoryd.indexer.search.keyword.MAX_QUERY_TERMS` in all; the added terms
then go through the same keyword plan, row and scan budgets as the query's own
(:mod:`memoryd.indexer.search.keyword_plan`). A bad file fails loading with a
:class:`SynonymFileError` naming the file and line.

The user file is watched without a thread: a search that needs the table looks
at the file's size, mtime and inode at most once every ``RELOAD_CHECK_SECONDS``
(one ``stat``, not one per search) and re-reads it when they changed. A new
version with a bad line, or a file that went away, leaves the previous table in
use and logs ``synonyms.reload_failed`` naming the file and line, once per
version: a running daemon keeps searching as it did rather than stopping on an
edit in progress.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import structlog

from memoryd.indexer.errors import ConfigError
from memoryd.indexer.search import keyword

MAX_ADDED_TERMS = 12
"""Terms one query's expansion may add: a bound on the keyword leg's extra work and noise."""

RELOAD_CHECK_SECONDS = 2.0
"""How stale the user file's table may be: the most often a search pays one ``stat`` for it."""

MAX_FILE_BYTES = 1_000_000
MAX_GROUP_NAMES = 32

_SEPARATORS = re.compile(r"[,，、]")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3041-\u30ff\uac00-\ud7a3]")
_BUILTIN = "synonyms.txt"

log = structlog.get_logger(__name__)


class SynonymFileError(ConfigError):
    """A synonym file that cannot be read or has a malformed line (the message names both)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line  # the bad line, for the reload event; None when the whole file is at fault


@dataclass(frozen=True)
class Alias:
    """One name of a group: how a query shows it (``needle`` or ``terms``) and what it adds (``adds``)."""

    name: str
    needle: str | None  # a Chinese name: recognised as this substring of the casefolded query
    terms: tuple[str, ...]  # analysed terms that must all be among the query's (names without Chinese)
    adds: tuple[str, ...]  # the keyword terms searched for this name


@dataclass(frozen=True)
class SynonymTable:
    groups: tuple[tuple[Alias, ...], ...] = ()

    def expand(self, query: str, terms: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
        """``terms`` plus the other names of every group the query names, and what each name added.

        The second value maps a recognised name to the terms it brought in, for ``--explain``.
        """
        out = list(terms)
        have = set(out)
        folded = query[-keyword.MAX_QUERY_CHARS:].casefold()
        budget = min(MAX_ADDED_TERMS, keyword.MAX_QUERY_TERMS - len(out))
        added: dict[str, list[str]] = {}
        for group in self.groups:
            found = [a for a in group if _named(a, folded, have)]
            if not found:
                continue
            for alias in group:
                new = [t for t in alias.adds if t not in have]
                if alias in found or not new or len(new) > budget:
                    continue
                out.extend(new)
                have.update(new)
                budget -= len(new)
                added.setdefault(found[0].name, []).extend(new)
        return out, added


EMPTY = SynonymTable()


def _named(alias: Alias, folded_query: str, query_terms: set[str]) -> bool:
    if alias.needle is not None:
        return alias.needle in folded_query
    return bool(alias.terms) and all(t in query_terms for t in alias.terms)


def load(user_file: Path | None = None, builtin: bool = True,
         clock: Callable[[], float] = time.monotonic) -> SynonymTable | ReloadingTable:
    """The built-in table (unless ``builtin`` is False) followed by the groups of ``user_file``.

    With a user file the result re-reads it when it changes (:class:`ReloadingTable`);
    ``clock`` paces those checks (a test passes its own).
    """
    groups: list[tuple[Alias, ...]] = []
    if builtin:
        text = resources.files(__package__ or "memoryd.indexer.search").joinpath(_BUILTIN).read_text("utf-8")
        groups += parse(text, f"built-in {_BUILTIN}")
    if user_file is None:
        return SynonymTable(tuple(groups))
    return ReloadingTable(tuple(groups), user_file, clock)


_Signature = tuple[int, int, int]  # (size, mtime_ns, inode): an in-place edit or an editor's rename-over changes it


class ReloadingTable:
    """The built-in groups plus a user file's, re-read when the file changes (see the module docstring).

    Reloading happens inside :meth:`expand` because the library owns no thread; a
    non-blocking lock lets one search re-read the file while the others go on with
    the table they have.
    """

    def __init__(self, builtin: tuple[tuple[Alias, ...], ...], path: Path, clock: Callable[[], float]) -> None:
        self._builtin = builtin
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: _Signature | None = _signature(path)
        self._table = SynonymTable(builtin + tuple(parse(_read(path), str(path))))
        self._next_check = clock() + RELOAD_CHECK_SECONDS

    @property
    def table(self) -> SynonymTable:
        """The table in use, after at most one check of the user file."""
        if self._clock() >= self._next_check and self._lock.acquire(blocking=False):
            try:
                self._refresh()
            finally:
                self._lock.release()
        return self._table

    @property
    def groups(self) -> tuple[tuple[Alias, ...], ...]:
        return self.table.groups

    def expand(self, query: str, terms: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
        """:meth:`SynonymTable.expand` on the current table."""
        return self.table.expand(query, terms)

    def _refresh(self) -> None:
        self._next_check = self._clock() + RELOAD_CHECK_SECONDS
        try:
            seen = _signature(self._path)
        except SynonymFileError as exc:
            self._reject(None, exc)
            return
        if seen == self._seen:
            return
        try:
            groups = parse(_read(self._path), str(self._path))
        except SynonymFileError as exc:
            self._reject(seen, exc)
            return
        self._seen = seen
        self._table = SynonymTable(self._builtin + tuple(groups))
        log.info("synonyms.reloaded", file=str(self._path), groups=len(groups))

    def _reject(self, seen: _Signature | None, exc: SynonymFileError) -> None:
        """Keep the table in use; report this version of the file once, not at every check."""
        if seen == self._seen:
            return
        self._seen = seen
        log.error("synonyms.reload_failed", file=str(self._path), line=exc.line, error=str(exc),
                  kept_groups=len(self._table.groups))


def _signature(path: Path) -> _Signature:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SynonymFileError(f"synonym file {path} cannot be read: {exc.strerror or exc}") from None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _read(path: Path) -> str:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SynonymFileError(f"synonym file {path} cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SynonymFileError(f"synonym file {path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SynonymFileError(f"{path}:{line}: not valid UTF-8", line) from None


def parse(text: str, source: str) -> list[tuple[Alias, ...]]:
    """The groups of a synonym file's ``text``; ``source`` names it in errors (``source:line: why``)."""
    groups = []
    for lineno, line in enumerate(text.splitlines(), 1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        names = [n.strip() for n in _SEPARATORS.split(body)]
        if any(not n for n in names):
            raise SynonymFileError(
                f"{source}:{lineno}: empty name in {body!r} (names are separated by commas)", lineno)
        if len(set(names)) < 2:
            raise SynonymFileError(
                f"{source}:{lineno}: a group needs at least two different names, got {body!r}", lineno)
        if len(names) > MAX_GROUP_NAMES:
            raise SynonymFileError(
                f"{source}:{lineno}: {len(names)} names; a group holds at most {MAX_GROUP_NAMES}", lineno)
        groups.append(tuple(_alias(n, source, lineno) for n in dict.fromkeys(names)))
    return groups


def _alias(name: str, source: str, lineno: int) -> Alias:
    terms = tuple(keyword.query_terms(name))
    if not terms:
        raise SynonymFileError(
            f"{source}:{lineno}: {name!r} has no searchable word (only stop words or punctuation)", lineno)
    if _CJK.search(name):
        return Alias(name, name.casefold(), (), terms)
    phrase = (" ".join(terms),) if len(terms) > 1 else terms
    return Alias(name, None, terms, phrase)
