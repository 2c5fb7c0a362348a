"""The ``files`` socket method: the memory files a session may read, for clients that browse them.

MCP hosts show memory files as *resources* (``memoryd mcp`` lists them with this
method and reads one with ``get``). What is listed obeys the same rules as a
search: the session's namespace (a direct peer sees only ``peers/ID/``), the
optional ``namespace`` and ``path_prefix`` params, and the watcher's include and
exclude globs. Every file goes through the resolver (:mod:`memoryd.indexer.pathguard`):
a name whose symlinks lead outside the roots, or out of the session's folder, is not
listed, so nothing is listed that ``get`` would refuse.

The roots are walked on each call (not read from the index): a file saved a moment
ago is listed even before it is indexed, and the walk needs no lock beside the worker.

``abstracts: true`` adds each listed file's abstract (:mod:`memoryd.daemon.api.file_abstracts`): it
reads every file of the page, so a page is then at most ``MAX_ABSTRACTS_LIMIT`` files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.daemon.api.access import path_check
from memoryd.daemon.api.file_abstracts import FileAbstracts
from memoryd.daemon.api.requests import Scope, read_scope
from memoryd.daemon.api.session import SessionClaim
from memoryd.daemon.api.vocabulary import FilesParams, FilesReply, param_names
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Handler, Peer, param, reject_unknown
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.ingestion.files import walk_root

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
MAX_ABSTRACTS_LIMIT = 500  # with abstracts: each file of the page is read

Found = tuple[int, str, os.stat_result]  # (root index, path relative to it, stat)


@dataclass(frozen=True)
class FilesRequest:
    scope: Scope | None
    check: Callable[[str, str], bool] | None
    offset: int
    limit: int
    abstracts: bool


class FileMethods:
    """``files {namespace?, path_prefix?, offset?, limit?}`` → ``{files: [{root, path, size, mtime}], next_offset}``.

    Files come sorted by root (config order) then path; ``next_offset`` is where the next
    page starts, null after the last one.
    """

    def __init__(self, *, roots: Callable[[], RootMap], path_filter: PathFilter,
                 abstracts: FileAbstracts | None = None) -> None:
        self._roots = roots
        self._filter = path_filter
        self._abstracts = abstracts  # None: a daemon without the abstract store wired (every answer "off")

    def handlers(self) -> dict[str, Handler]:
        return {"files": self.files}

    def files(self, params: dict[str, Any], peer: Peer) -> FilesReply:
        req = self._parse(params, peer)
        if req.scope is None:  # a namespace outside what the session may read: nothing, as for a search
            return self._with_abstracts(req, {"files": [], "next_offset": None})
        found = sorted(self._walk(req.scope, req.check), key=lambda f: (f[0], f[1]))
        page = found[req.offset : req.offset + req.limit]
        end = req.offset + len(page)
        roots = self._roots().roots
        return self._with_abstracts(req, {
            "files": [{"root": str(roots[i]), "path": rel, "size": st.st_size, "mtime": round(st.st_mtime, 3)}
                      for i, rel, st in page],
            "next_offset": end if end < len(found) else None})

    def _with_abstracts(self, req: FilesRequest, reply: FilesReply) -> FilesReply:
        """``reply`` with each file's abstract and the daemon's ``abstracts`` state, when asked for."""
        if not req.abstracts:
            return reply
        abstracts = self._abstracts
        reply["abstracts"] = "off" if abstracts is None else abstracts.state
        for f in reply["files"]:
            f["abstract"] = None if abstracts is None else abstracts.of_file(Path(f["root"]), f["path"])
        return reply

    def _parse(self, params: dict[str, Any], peer: Peer) -> FilesRequest:
        reject_unknown(params, param_names(FilesParams))
        offset, limit = param(params, "offset", int, 0), param(params, "limit", int, DEFAULT_LIMIT)
        if offset < 0:
            raise InvalidParams(f"param 'offset' must be >= 0, got {offset}")
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidParams(f"param 'limit' must be in 1..{MAX_LIMIT}, got {limit}")
        abstracts = param(params, "abstracts", bool, False)
        if abstracts and limit > MAX_ABSTRACTS_LIMIT:
            raise InvalidParams(f"param 'limit' must be in 1..{MAX_ABSTRACTS_LIMIT} with 'abstracts' (each file "
                                f"of the page is read), got {limit}")
        session = SessionClaim.of(params, peer).resolve()
        roots = self._roots()
        return FilesRequest(read_scope(params, session, roots.roots[0]), path_check(session, roots), offset, limit,
                            abstracts)

    def _walk(self, scope: Scope, check: Callable[[str, str], bool] | None) -> Iterator[Found]:
        """(root index, rel, stat) of every readable memory file in ``scope``."""
        roots = self._roots()
        folders: dict[str, str] = {}
        for i, root in enumerate(roots.roots):
            start = _start_folder(root, scope.path_prefix)
            if start is None or not (root / start).is_dir():
                continue
            for rel, st in self._walk_folder(root, start):
                if st is None or not _in_scope(root, rel, scope):
                    continue
                if not roots.guard.resolve(root, rel, folders).inside:
                    continue
                if check is None or check(str(root), rel):
                    yield i, rel, st

    def _walk_folder(self, root: Path, folder: str) -> Iterator[tuple[str, os.stat_result | None]]:
        """(path relative to ``root``, stat) of the files under ``root/folder`` the root-relative filter accepts."""
        accept, accept_dir = self._filter, self._filter.accept_dir
        for sub, st in walk_root(root / folder if folder else root, lambda s: accept(_join(folder, s)),
                                 lambda s: accept_dir(_join(folder, s))):
            yield _join(folder, sub), st


def _start_folder(root: Path, prefix: str | None) -> str | None:
    """The folder of ``root`` (relative, "" for the root) that holds every file ``prefix`` can match;
    None when the prefix lies in another root. Only a walk's start: :func:`_in_scope` decides."""
    if prefix is None:
        return ""
    if os.path.isabs(prefix):
        base = f"{root}/"
        if base.startswith(prefix):  # the prefix names the root or a folder above it
            return ""
        if not prefix.startswith(base):
            return None
        prefix = prefix[len(base) :]
    return prefix.rpartition("/")[0]


def _in_scope(root: Path, rel: str, scope: Scope) -> bool:
    """The test a search applies (``memoryd.indexer.storage.embedded.hybrid``): the prefix on the relative or the
    absolute path, and no excluded folder on the relative one."""
    prefix = scope.path_prefix
    if prefix is not None and not (rel.startswith(prefix) or f"{root}/{rel}".startswith(prefix)):
        return False
    return not any(rel.startswith(ex) for ex in scope.exclude_prefixes)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name
