"""The socket's vocabulary: every method, its params and reply types and what it is allowed to do.

One table (:data:`METHODS`) says, for each JSON-RPC method the daemon answers: the TypedDict of
its params (the keys its parser accepts: :func:`param_names`), the TypedDict of its reply, whether
it reads or writes memory, whether a bound uid (``server.allowed_uids``) may call it, and which
audit log records it. Everything that used to keep its own list derives from here: the session
gate (:data:`BOUND_METHODS`, :mod:`memoryd.daemon.api.session`), the read audit
(:data:`READ_AUDITED`, :mod:`memoryd.daemon.api.read_audit`), the parsers' accepted keys, the
CLI's ``--mode`` choices, the MCP tools' read-only hints and the UI's search form
(:data:`SEARCH_MODES`, :data:`DEFAULT_K`).

Dependency-free on purpose (the standard library only, no ``memoryd`` import): the client side
(CLI, MCP bridge, UI) imports it without loading the server, and a test keeps it so.
``docs/socket-methods.md`` is the recipe for adding a method.

The reply types are what handlers return and what renderers read: a key a handler stops sending,
or a renderer starts reading, shows up in mypy rather than at a user's terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

#: The search modes, in the order clients offer them; ``hybrid`` first (the default).
#: ``memoryd.indexer.config.SEARCH_MODES`` is the library's spelling of the same Literal; a test keeps them equal.
SEARCH_MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")
#: Hits a client asks for when the user names no number: the shipped ``search.k`` (what the daemon
#: itself uses when a request has no ``k``), so the CLI, MCP and the UI show the same list.
DEFAULT_K = 8
#: The most hits a client offers to ask for (the daemon itself accepts up to 1000).
MAX_CLIENT_K = 50

Access = Literal["read", "write"]
Audit = Literal["read", "write"] | None


class SessionParam(TypedDict, total=False):
    """The ``session`` param (memoryd.indexer.access): who is asking."""

    kind: str
    peer: str
    group: str
    agent: str  # kind "agent": confined to agents/ID (docs/security.md, "Agent isolation")
    turn: str


# -- params (what each method's parser accepts; every key is optional on the wire until checked) -----------


class NoParams(TypedDict):
    """``ping`` and ``status`` take none."""


class SearchParams(TypedDict, total=False):
    query: str
    k: int
    mode: str
    path_prefix: str
    min_score: float | str  # a number in 0..1, or "default" for search.min_score
    explain: bool
    namespace: str
    sites: list[str]
    session: SessionParam


class ContextParams(TypedDict, total=False):
    query: str
    max_tokens: int
    k: int
    path_prefix: str
    min_score: float | str
    namespace: str
    mode: str
    session: SessionParam


class GetParams(TypedDict, total=False):
    path: str
    start_line: int
    end_line: int
    site: str
    abstract: bool  # add the file's abstract (daemon/api/file_abstracts.py)
    session: SessionParam


class ReindexParams(TypedDict, total=False):
    paths: list[str]
    wait: bool


class RememberParams(TypedDict, total=False):
    content: str
    type: str
    namespace: str
    explain: bool
    session: SessionParam


class BankProposeParams(TypedDict, total=False):
    turns: list[dict[str, str]]
    transcript: str
    namespace: str
    session: SessionParam


class BankReplyParams(TypedDict, total=False):
    prompt: str
    previous: str
    transcript: str
    session: SessionParam


class ForgetParams(TypedDict, total=False):
    path: str
    line: int
    text: str
    site: str
    session: SessionParam


class AuditParams(TypedDict, total=False):
    tail: int
    log: str
    session: SessionParam


class UserPromptParams(TypedDict, total=False):
    session: SessionParam


class HistoryParams(TypedDict, total=False):
    path: str
    limit: int
    session: SessionParam


class RecordParams(TypedDict, total=False):
    """``undo`` and ``purge``: one history record."""

    id: str
    session: SessionParam


class FilesParams(TypedDict, total=False):
    namespace: str
    path_prefix: str
    offset: int
    limit: int
    abstracts: bool  # add each file's abstract (daemon/api/file_abstracts.py)
    session: SessionParam


class ListParams(TypedDict, total=False):
    namespace: str
    type: str
    since: str
    until: str
    limit: int
    cursor: str
    session: SessionParam


class ExportParams(TypedDict, total=False):
    namespace: str
    type: str
    since: str
    until: str
    format: str
    session: SessionParam


class NamespaceParams(TypedDict, total=False):
    """``stats`` (namespace optional) and ``clear`` (namespace required)."""

    namespace: str
    session: SessionParam


class ImportParams(TypedDict, total=False):
    data: str
    namespace: str
    dry_run: bool
    continues: str
    session: SessionParam


class UpdateSectionParams(TypedDict, total=False):
    path: str
    section: str
    content: str
    session: SessionParam


class PromoteParams(TypedDict, total=False):
    path: str
    line: int
    to: str
    type: str
    text: str
    session: SessionParam


class TurnParam(TypedDict, total=False):
    role: str
    text: str
    id: str  # as `memoryd observe` computes it over the whole transcript


class ObserveParams(TypedDict, total=False):
    session_id: str
    namespace: str
    transcript: str  # a whole transcript, any format (or turns)
    turns: list[TurnParam]
    format: str
    wait: bool
    final: bool
    session: SessionParam


# -- replies -------------------------------------------------------------------------------------------------


class PingReply(TypedDict):
    version: str
    uptime_s: float
    pid: int


class UserPromptReply(TypedDict):
    """``user_prompt``: how many agent write turns the person's new prompt ended."""

    turns_ended: int


class HitReply(TypedDict):
    """One search hit (memoryd.indexer.search.hits.Hit.to_dict)."""

    root: str
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    vector_score: float
    text_score: float
    match_lines: list[int]
    site: NotRequired[str]
    importance: NotRequired[Any]
    reinforcements: NotRequired[int]
    explain: NotRequired[dict[str, Any]]


class SearchReply(TypedDict):
    """``search`` (memoryd.indexer.search.hits.SearchResult.to_json, paths as the session may see them)."""

    mode: str
    hits: list[HitReply]
    took_ms: float
    degraded: NotRequired[str]
    abstained: NotRequired[bool]
    reason: NotRequired[str | None]
    keyword_plan: NotRequired[dict[str, Any]]
    query_searched: NotRequired[str]
    query_analysis: NotRequired[dict[str, Any]]
    roots: NotRequired[int]  # more than one root: clients show each hit's root


class SourceReply(TypedDict):
    root: str
    path: str
    start_line: int
    end_line: int
    score: float
    lines: NotRequired[list[int]]
    site: NotRequired[str]
    summarized: NotRequired[bool]  # shown as points of the summary section (a model summarized it)


class ContextReply(TypedDict):
    """``context`` (memoryd.indexer.search.context.ContextBlock.to_json, plus the budget and the time)."""

    text: str
    tokens: int
    sources: list[SourceReply]
    omitted: int
    abstained: NotRequired[bool]
    reason: NotRequired[str | None]
    max_tokens: int
    took_ms: float


class GetReply(TypedDict):
    root: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    abstract: NotRequired[str | None]  # asked for: the file's abstract, None when it has none (yet)
    abstracts: NotRequired[str]  # asked for: "on" (a model makes them at idle time) | "off" (no [llm])


class WriteReply(TypedDict, total=False):
    """``remember``, ``forget``, ``undo``, ``promote``: what the write did (memoryd.indexer.write.writer.Outcome).

    ``decision`` is always there: appended | reinforced | replaced | removed | unchanged | rejected …;
    a ``remember`` adds how it was routed (type, section, scope, importance, routed_by) and a
    rejection its ``rule`` and ``stage``.
    """

    decision: str
    reason: str
    path: str
    line: int
    namespace: str
    score: float
    previous: str
    reinforcement: int
    related: dict[str, Any]
    history_id: str
    also: list[dict[str, Any]]
    indexed: bool
    index_note: str
    explain: dict[str, Any]
    type: str | None
    section: str | None
    scope: str | None
    importance: Any
    routed_by: str | None
    rule: str
    stage: str
    source: dict[str, Any]  # promote: the entry copied (path, line, namespace)


class FileReply(TypedDict):
    root: str
    path: str
    size: int
    mtime: float
    abstract: NotRequired[str | None]  # asked for (abstracts: true), as GetReply's


class FilesReply(TypedDict):
    files: list[FileReply]
    next_offset: int | None
    abstracts: NotRequired[str]  # asked for: "on" | "off", as GetReply's


class StatsReply(TypedDict):
    """``stats``: files, entries and bytes per namespace, and their totals."""

    namespaces: dict[str, dict[str, int]]
    total: dict[str, int]


class ExportReply(TypedDict):
    format: str
    count: int
    text: str


class AuditReply(TypedDict):
    entries: list[dict[str, Any]]
    path: str
    log: str


class ListReply(TypedDict):
    entries: list[dict[str, Any]]
    next_cursor: str | None


class HistoryReply(TypedDict):
    """``history``: the newest records first; with a ``path``, whether it names anything (an empty
    list alone cannot tell "no history" from a typo) and the roots it was looked up in."""

    entries: list[dict[str, Any]]
    path: str
    path_exists: NotRequired[bool]
    roots: NotRequired[list[str]]


class PurgeReply(TypedDict):
    decision: str
    id: str
    entry: dict[str, Any]


class ObserveReply(TypedDict, total=False):
    note: str  # the session note, relative to the first root ("" before the first capture)
    captured: int
    seen: int
    bytes: int
    withheld_lines: int
    pending: int
    expired: list[str]
    extraction: dict[str, Any]  # {"state": off | queued | done | failed | throttled | nothing pending, ...}


class StatusReply(TypedDict, total=False):
    """``status`` (memoryd.daemon.api.status.DaemonStatus.to_json): the daemon's fields, and the
    index's own (``files``, ``chunks``, ``model``, ``cache``, ``index``, ``skipped``, ``vectors``,
    ``storage``, ``line_vectors``), which differ by backend."""

    version: str
    pid: int
    uptime_s: float
    files: int
    chunks: int
    model: dict[str, Any]
    cache: dict[str, Any]
    index: dict[str, Any]
    skipped: list[dict[str, str]]
    vectors: dict[str, Any]
    storage: dict[str, Any]
    line_vectors: dict[str, int]
    rerank: dict[str, Any]  # [rerank] on: its server, applied, fallbacks, last_error (indexer/search/rerank_step.py)
    pending: int
    reconciling: bool
    reconcile_progress: list[int]
    roots: list[dict[str, Any]]
    reconcile: dict[str, Any]
    last_event: str | None
    last_reconcile: str | None
    last_error: str | None
    last_watch_failure: str | None
    socket: str
    data_dir: str
    debounced: dict[str, int]
    fresh: bool
    data_dir_bytes: int | None
    rss_bytes: int | None
    jobs: list[dict[str, Any]]
    history: dict[str, dict[str, int]]
    observe: dict[str, Any]  # daemon/api/observe.py: captures, extractions, the [llm] health (never its key)
    model_build: dict[str, Any]  # a first start's model build until ready: state, detail (daemon/model_build.py)


#: The replies not typed field by field yet: an open JSON object.
OpenReply = dict[str, Any]


# -- the table -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One socket method.

    ``access``: whether it changes memory (``write``) or only reads or reports (``read``).
    ``bound``: a uid in ``server.allowed_uids`` may call it (as its one session); every other
    method is the owner's (default deny: a new method is the owner's until it says otherwise).
    ``audit``: the log that records each call (``read``: ``audit-reads.jsonl``, wrapped where the
    handlers are assembled; ``write``: the write audit, which the handler keeps itself).
    """

    name: str
    params: type
    reply: type
    access: Access
    bound: bool
    audit: Audit
    summary: str


METHODS: tuple[Method, ...] = (
    Method("ping", NoParams, PingReply, "read", False, None, "version, uptime and pid"),
    Method("status", NoParams, StatusReply, "read", False, None, "index, watchers, queue and freshness"),
    Method("search", SearchParams, SearchReply, "read", True, "read", "hybrid / vector / keyword search"),
    Method("context", ContextParams, ContextReply, "read", True, "read",
           "the best memories as one Markdown block within a token budget"),
    Method("get", GetParams, GetReply, "read", True, "read", "lines of a memory file"),
    Method("files", FilesParams, FilesReply, "read", True, "read", "the memory files, a page at a time"),
    Method("list", ListParams, ListReply, "read", True, "read", "memory entries with filters"),
    Method("export", ExportParams, ExportReply, "read", True, "read", "entries as JSON Lines or Markdown"),
    Method("stats", NamespaceParams, StatsReply, "read", True, "read", "files, entries and bytes per namespace"),
    Method("reindex", ReindexParams, OpenReply, "read", False, None, "re-index paths or everything"),
    Method("remember", RememberParams, WriteReply, "write", True, "write", "write a memory"),
    Method("forget", ForgetParams, WriteReply, "write", False, "write", "remove one entry"),
    Method("audit", AuditParams, AuditReply, "read", False, None, "the tail of the write or read audit log"),
    Method("user_prompt", UserPromptParams, UserPromptReply, "read", False, None,
           "a person's new prompt (a host's prompt hook): every agent write turn ends"),
    Method("history", HistoryParams, HistoryReply, "read", False, None, "recent changes, newest first"),
    Method("undo", RecordParams, WriteReply, "write", False, "write", "take one change back"),
    Method("purge", RecordParams, PurgeReply, "write", False, "write", "remove one record's texts from the history"),
    Method("import", ImportParams, OpenReply, "write", False, "write", "import entries"),
    Method("clear", NamespaceParams, OpenReply, "write", False, "write", "remove a namespace's memories"),
    Method("update_section", UpdateSectionParams, WriteReply, "write", False, "write",
           "replace one section of a Memory Bank file"),
    Method("promote", PromoteParams, WriteReply, "write", False, "write", "copy an entry into the shared memory"),
    Method("observe", ObserveParams, ObserveReply, "write", False, "write",
           "a conversation in: captured as a session note, extracted with [llm]"),
    Method("bank_propose", BankProposeParams, OpenReply, "read", True, None,
           "the 💾 Memory Bank proposal for a transcript (writes nothing)"),
    Method("bank_reply", BankReplyParams, OpenReply, "write", True, "write",
           "a user's answer to a proposal: a confirm writes it through remember"),
)

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}
#: What a bound uid may call (memoryd.daemon.api.session's gate).
BOUND_METHODS: frozenset[str] = frozenset(m.name for m in METHODS if m.bound)
#: The methods each call of which the read audit records (memoryd.daemon.api.read_audit).
READ_AUDITED: frozenset[str] = frozenset(m.name for m in METHODS if m.audit == "read")
#: The methods that change memory (MCP's readOnlyHint is their complement).
WRITE_METHODS: frozenset[str] = frozenset(m.name for m in METHODS if m.access == "write")


def param_names(params: type) -> frozenset[str]:
    """The keys a params TypedDict names: what that method's parser accepts (anything else is refused)."""
    return frozenset(params.__annotations__)


def unlisted(handled: Iterable[str]) -> tuple[list[str], list[str]]:
    """The handlers without a row here, and the rows without a handler (both empty when they agree).

    The daemon refuses to start on either: a method without a row would be the owner's and
    unaudited by accident, a row without a handler a promise the socket does not keep.
    """
    names = set(handled)
    return sorted(names - BY_NAME.keys()), sorted(BY_NAME.keys() - names)
