"""The params of the memory-management methods (:mod:`memoryd.daemon.api.manage`), parsed once into typed requests.

As in :mod:`memoryd.daemon.api.requests`: params are checked in a fixed order so the
first bad one is named, unknown params are refused, and the session is left as a
claim for the write methods (checked inside their audit record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.daemon.api.requests import Params
from memoryd.daemon.api.session import SessionClaim
from memoryd.daemon.api.vocabulary import (
    ExportParams,
    ImportParams,
    ListParams,
    NamespaceParams,
    PromoteParams,
    UpdateSectionParams,
    param_names,
)
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Peer, param, reject_unknown
from memoryd.indexer.write.router import TYPES
from memoryd.indexer.write.transfer import FORMATS, JSONL

MAX_LIST_LIMIT = 1000
MAX_IMPORT_LINES = 1000
MAX_SECTION_CHARS = 200
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Filters:
    """Which entries ``list`` and ``export`` show: a namespace (None: all the session may read), a type, days."""

    namespace: str | None
    type: str | None
    since: str | None
    until: str | None


@dataclass(frozen=True)
class ListRequest:
    filters: Filters
    limit: int
    cursor: str | None
    claim: SessionClaim


@dataclass(frozen=True)
class ExportRequest:
    filters: Filters
    format: str
    claim: SessionClaim


@dataclass(frozen=True)
class StatsRequest:
    namespace: str | None
    claim: SessionClaim


@dataclass(frozen=True)
class ImportRequest:
    data: str
    namespace: str | None  # for lines that name none
    dry_run: bool
    claim: SessionClaim
    continues: str | None = None  # a dry run's import_id: this request goes on from that one


@dataclass(frozen=True)
class ClearRequest:
    namespace: str
    claim: SessionClaim


@dataclass(frozen=True)
class SectionRequest:
    path: str
    section: str
    content: str
    claim: SessionClaim


@dataclass(frozen=True)
class PromoteRequest:
    path: str
    line: int
    to: str
    type: str | None
    claim: SessionClaim
    expect: str | None = None  # the entry's text as the caller saw it: refused if the line now holds another


def _filters(params: Params) -> Filters:
    ns = param(params, "namespace", str, None)
    kind = param(params, "type", str, None)
    if kind is not None and kind not in TYPES:
        raise InvalidParams(f"param 'type' must be one of {list(TYPES)}, got {kind[:40]!r}")
    since, until = _day(params, "since"), _day(params, "until")
    if since is not None and until is not None and since > until:
        raise InvalidParams(f"param 'since' ({since}) is after 'until' ({until})")
    return Filters(ns, kind, since, until)


def _day(params: Params, key: str) -> str | None:
    value = param(params, key, str, None)
    if value is not None and not _DAY.fullmatch(value):
        raise InvalidParams(f"param {key!r} must be a date YYYY-MM-DD, got {value[:40]!r}")
    return value


def parse_list(params: Params, peer: Peer) -> ListRequest:
    reject_unknown(params, param_names(ListParams))
    filters = _filters(params)
    limit = param(params, "limit", int, 100)
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidParams(f"param 'limit' must be in 1..{MAX_LIST_LIMIT}, got {limit}")
    cursor = param(params, "cursor", str, None)
    if cursor is not None and (len(cursor) > 4200 or ":" not in cursor or not cursor.rpartition(":")[2].isdigit()):
        raise InvalidParams("param 'cursor' must be the next_cursor a previous page returned (PATH:LINE)")
    return ListRequest(filters, limit, cursor, SessionClaim.of(params, peer))


def parse_export(params: Params, peer: Peer) -> ExportRequest:
    reject_unknown(params, param_names(ExportParams))
    filters = _filters(params)
    fmt = param(params, "format", str, JSONL)
    if fmt not in FORMATS:
        raise InvalidParams(f"param 'format' must be one of {list(FORMATS)}, got {fmt[:40]!r}")
    return ExportRequest(filters, fmt, SessionClaim.of(params, peer))


def parse_stats(params: Params, peer: Peer) -> StatsRequest:
    reject_unknown(params, param_names(NamespaceParams))
    return StatsRequest(param(params, "namespace", str, None), SessionClaim.of(params, peer))


def parse_import(params: Params, peer: Peer) -> ImportRequest:
    reject_unknown(params, param_names(ImportParams))
    data = param(params, "data", str)
    lines = sum(1 for line in data.split("\n") if line.strip())  # JSON holds no raw newline: split on it alone
    if lines > MAX_IMPORT_LINES:
        raise InvalidParams(f"param 'data' has {lines} lines; an import takes at most {MAX_IMPORT_LINES} "
                            "(split the file)", {"max": MAX_IMPORT_LINES})
    dry_run, continues = param(params, "dry_run", bool, False), param(params, "continues", str, None)
    if continues is not None and not dry_run:
        raise InvalidParams("param 'continues' is for a dry run (a real import's earlier requests are written)")
    return ImportRequest(data, param(params, "namespace", str, None), dry_run, SessionClaim.of(params, peer),
                         continues)


def parse_clear(params: Params, peer: Peer) -> ClearRequest:
    reject_unknown(params, param_names(NamespaceParams))
    return ClearRequest(param(params, "namespace", str), SessionClaim.of(params, peer))


def parse_section(params: Params, peer: Peer) -> SectionRequest:
    reject_unknown(params, param_names(UpdateSectionParams))
    path = param(params, "path", str)
    section = param(params, "section", str)
    if not section.strip() or len(section) > MAX_SECTION_CHARS or "\n" in section:
        raise InvalidParams(f"param 'section' must be a heading title (one line, 1..{MAX_SECTION_CHARS} characters)")
    return SectionRequest(path, section, param(params, "content", str), SessionClaim.of(params, peer))


def parse_promote(params: Params, peer: Peer) -> PromoteRequest:
    reject_unknown(params, param_names(PromoteParams))
    path = param(params, "path", str)
    line = param(params, "line", int)
    if line < 1:
        raise InvalidParams(f"param 'line' must be >= 1, got {line}")
    to = param(params, "to", str, "default")
    kind = param(params, "type", str, None)
    if kind is not None and kind not in TYPES:
        raise InvalidParams(f"param 'type' must be one of {list(TYPES)}, got {kind[:40]!r}")
    return PromoteRequest(path, line, to, kind, SessionClaim.of(params, peer), param(params, "text", str, None))
