"""Which root a path belongs to, and its path relative to that root."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from memoryd.indexer.pathguard import PathGuard


class RootMap:
    """The configured roots, longest first, for locating absolute paths.

    Roots are compared both as given and resolved (a root reached through a
    symlink still matches the paths watchdog reports under its real path).
    """

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots: list[Path] = list(dict.fromkeys(Path(os.path.abspath(r)) for r in roots))
        pairs = [(r, r) for r in self.roots] + [(Path(os.path.realpath(r)), r) for r in self.roots]
        self._by_prefix = sorted(set(pairs), key=lambda p: -len(str(p[0])))
        self.guard = PathGuard(self.roots)  #: the resolver every request path goes through

    def locate(self, path: Path | str) -> tuple[Path, str] | None:
        """(root, relative posix path) for a path inside a root; None outside every root."""
        given = Path(os.path.abspath(path))
        # The path as given first (watchdog reports paths under the root as configured), then its
        # parent resolved (an editor may name the file through a symlinked folder).
        for p in (given, Path(os.path.realpath(given.parent)) / given.name):
            for prefix, root in self._by_prefix:
                try:
                    rel = p.relative_to(prefix)
                except ValueError:
                    continue
                if rel.parts:
                    return root, rel.as_posix()
        return None
