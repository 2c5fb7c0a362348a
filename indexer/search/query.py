"""One search request, as the pipeline runs it: built once from the caller's parameters.

:class:`Query` is the only place that names the search parameters: the socket requests
(``SearchRequest.to_query``, which ``--offline`` runs too), the writer's candidate search,
the index and both storage backends pass this one frozen object along instead of
re-declaring them; ``MemoryIndex.query`` is the one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryd.indexer.config import SearchMode


@dataclass(frozen=True)
class Query:
    """What to search for and how.

    ``k`` and ``mode`` default to ``[search]``'s (None). ``min_score`` is the abstention
    threshold on the calibrated score. ``path_prefix`` (root-relative, or absolute with its
    root) keeps one folder; ``exclude_prefixes`` drop whole folders; both match exactly
    (case-sensitive, no wildcards). ``path_check`` is asked ``(root, rel)`` once per candidate
    file and drops the files it refuses (a confined session). ``query_vector`` returns the
    cleaned query's embedding computed elsewhere (e.g. on another thread; it is called after
    the keyword leg, so the two overlap). ``sites`` keeps those sites' files (a backend with
    sites; None: every site). ``explain`` adds each hit's ranks, scores and the query analysis.
    """

    text: str
    k: int | None = None
    mode: SearchMode | None = None
    path_prefix: str | None = None
    min_score: float | None = None
    explain: bool = False
    exclude_prefixes: tuple[str, ...] = ()
    query_vector: Callable[[], Any] | None = None
    path_check: Callable[[str, str], bool] | None = None
    sites: tuple[str, ...] | None = None

