"""The MCP tools of ``memoryd mcp``: what a model sees (names, descriptions, JSON schemas).

Pure data and small pure functions, no SDK import, so that the schemas and the
argument checks can be tested without spawning anything. The descriptions are
written for a model to read: when to call the tool, what comes back, and what
each argument does. Every input schema is closed (``additionalProperties: false``)
so a misspelt argument is refused instead of silently ignored, and every optional
argument states its default (or what leaving it out means).

Every tool also declares an ``outputSchema``: the shape of the ``structuredContent``
it returns, next to the tool's input schema. Output schemas name and type every
field the bridge sets but stay open (extra fields allowed), so a newer daemon that
adds a field does not make a host reject an answer. The annotations tell a host
what a call can do: only ``memory_remember`` writes, and it can replace an entry.

:func:`check_arguments` raises :class:`ToolError` with a message that names the
argument at fault; :mod:`memoryd.daemon.client.mcp_server` turns it into an MCP tool error
(``isError: true``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.daemon.api.vocabulary import DEFAULT_K, MAX_CLIENT_K, SEARCH_MODES, WRITE_METHODS
from memoryd.daemon.client.cli_write import TYPES
from memoryd.indexer.observe.transcript import FORMATS as TRANSCRIPT_FORMATS

# memoryd.indexer.access's id rule, repeated here so the schema can state it.
ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAMESPACE = rf"^(default|(agent|peer|group):{ID})$"
MODES = SEARCH_MODES
MAX_QUERY_CHARS = 8192  # memoryd.daemon.api.requests.MAX_QUERY_CHARS (the bridge does not load the server side)
DEFAULT_CONTEXT_TOKENS = 800  # the budget the context quality target is measured at (docs/quality.md)


class ToolError(Exception):
    """A tool call that cannot be answered; ``str()`` is the message the model reads."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its input ``schema`` (closed), its ``output`` schema (open) and what a call may change.

    ``destructive``: a call may overwrite or remove what is stored (MCP's ``destructiveHint``);
    ``idempotent``: repeating a call with the same arguments changes nothing more;
    ``turn``: a call is one of the agent's memory writes of its turn (``write.max_per_turn``), so it
    carries the turn id and keeps the turn open (observe does not: handing the conversation over
    after each reply must neither use up nor prolong the turn's allowance).
    """

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    output: dict[str, Any]
    method: str  # the socket method a call sends (memoryd.daemon.api.vocabulary)
    destructive: bool = False
    idempotent: bool = True
    turn: bool = True

    @property
    def read_only(self) -> bool:
        """MCP's ``readOnlyHint``: the socket method changes no memory (its row in the vocabulary says so)."""
        return self.method not in WRITE_METHODS


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _out(properties: dict[str, Any], required: tuple[str, ...] | None = None) -> dict[str, Any]:
    """An output schema: every field typed, ``required`` (default: all of them), extra fields allowed."""
    return {"type": "object", "properties": properties,
            "required": list(properties if required is None else required)}


def _opt(type_: str) -> dict[str, Any]:
    """A field the daemon may leave null (an older daemon, or nothing to report)."""
    return {"type": [type_, "null"]}


_INT, _NUM, _STR, _BOOL = ({"type": t} for t in ("integer", "number", "string", "boolean"))


_QUERY = {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
          "description": "What to look for: a question or keywords, in any language."}
_READ_NS = {"type": "string", "pattern": NAMESPACE,
            "description": "Only read one namespace: 'default' (the shared memory, outside the agents/, peers/ "
                           "and groups/ folders), 'agent:ID' (agents/ID/), 'peer:ID' (peers/ID/) or 'group:ID' "
                           "(groups/ID/). Omit to read all memory this session may read."}
_MIN_SCORE = {"type": "number", "minimum": 0, "maximum": 1,
              "description": "Leave out hits whose relevance `score` is below this (0-1). Omit to use the "
                             "daemon's default threshold; 0 returns every hit, however weak."}
_PATH_PREFIX = {"type": "string", "minLength": 1, "maxLength": 4096,
                "description": "Only read files whose path starts with this: relative to the first memory "
                               "folder (e.g. 'memory/' for the daily notes, 'memory-bank/') or absolute. Omit "
                               "to read every file this session may read."}
_CITED = {"path": _STR, "startLine": _INT, "endLine": _INT, "root": _opt("string")}
_PREVIOUS = {"type": "string", "description": "'replaced': the entry's text before; 'reinforced': the entry that "
                                             "absorbed the memory."}
_UNDO_ID = {"type": "string", "description": "The history record of the change: `memoryd undo ID` takes it back."}

SEARCH = ToolSpec(
    "memory_search", "Search memory",
    "Search the Markdown memory files (MEMORY.md, memory/YYYY-MM-DD.md daily notes, memory-bank/, notes) "
    "with hybrid semantic + keyword search. Call it before answering questions about prior work, decisions, "
    "dates, people, preferences or todos. The index is live: a file saved a few seconds ago is included. "
    "Returns the best snippets, best first, each with its file `path`, line span (`startLine`-`endLine`, "
    "also as `citation` \"path:start-end\"), `matchLines` (the line numbers that matched best, best first; "
    "the snippet is centred on them) and a relevance `score` (0-1, higher is better). To read more "
    "around a hit, call memory_get with its path and from=startLine. No results means nothing relevant is "
    "stored.",
    _obj({
        "query": _QUERY,
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_CLIENT_K, "default": DEFAULT_K,
              "description": f"How many snippets to return (1-50; default {DEFAULT_K} unless the daemon's "
                             "search.k says otherwise)."},
        "namespace": _READ_NS,
        "mode": {"type": "string", "enum": list(MODES), "default": MODES[0],
                 "description": "'hybrid' (default; best for most questions), 'vector' (meaning only, for "
                                "paraphrases) or 'keyword' (exact words: names, identifiers, error messages)."},
        "min_score": _MIN_SCORE,
        "path_prefix": _PATH_PREFIX,
        "sites": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                  "description": "Only with a shared (PostgreSQL) memory: search only these machines' memory, "
                                 "by site id; 'self' is this machine. Omit to search every site."},
    }, ("query",)),
    _out({
        "results": {"type": "array", "items": _out({
            **_CITED, "score": _NUM, "snippet": _STR, "heading": _STR, "citation": _STR,
            "matchLines": {"type": "array", "items": _INT}})},
        "mode": {"type": "string", "enum": list(MODES)},
        "tookMs": _NUM,
    }),
    method="search",
)

GET = ToolSpec(
    "memory_get", "Read a memory file",
    "Read lines of one memory file (read-only). `path` is a path as returned by memory_search (relative to "
    "its memory folder) or an absolute path inside a memory folder; anything outside the memory folders is "
    "refused. Read only the part you need: `from` is the first line (1-based), `lines` how many lines. "
    "Returns the text with its line span and the file's total line count.",
    _obj({
        "path": {"type": "string", "minLength": 1,
                 "description": "The file, e.g. 'memory/2026-01-02.md' or 'MEMORY.md'."},
        "from": {"type": "integer", "minimum": 1, "default": 1,
                 "description": "First line to return, 1-based (default 1)."},
        "lines": {"type": "integer", "minimum": 1, "maximum": 10000,
                  "description": "Number of lines to return. Omit to read to the end of the file."},
    }, ("path",)),
    _out({"path": _STR, "root": _opt("string"), "from": _INT, "to": _INT, "totalLines": _opt("integer"),
          "text": _STR}),
    method="get",
)

CONTEXT = ToolSpec(
    "memory_context", "Load relevant memories",
    "Get one ready-to-use Markdown block of the memories most relevant to `query`, fitted to a token budget. "
    "Use it at the start of a task to load background in one call instead of several searches. Each section "
    "is headed by its source `path:start-end`. Returns an empty block when nothing relevant is stored.",
    _obj({
        "query": _QUERY,
        "max_tokens": {"type": "integer", "minimum": 16, "maximum": 100000, "default": DEFAULT_CONTEXT_TOKENS,
                       "description": "Budget for the whole block in model tokens (16-100000; about 4 "
                                      f"characters of English per token; default {DEFAULT_CONTEXT_TOKENS}). "
                                      "500-2000 suits most tasks."},
        "namespace": _READ_NS,
        "min_score": _MIN_SCORE,
        "path_prefix": _PATH_PREFIX,
    }, ("query",)),
    _out({
        "text": _STR, "tokens": _opt("integer"), "maxTokens": _INT,
        "sources": {"type": "array", "items": _out({**_CITED, "score": _opt("number")})},
        "omitted": _INT,
        "abstained": _BOOL, "reason": _STR,
    }, ("text", "tokens", "maxTokens", "sources", "omitted")),
    method="context",
)

REMEMBER = ToolSpec(
    "memory_remember", "Save a memory",
    "Save one durable fact to memory: a decision, preference, instruction, pattern, entity or journal note. "
    "Write one self-contained statement (who/what, and why if known), never secrets, tokens or passwords. "
    "memoryd files it and checks it against what is stored. `decision` in the result says what happened: "
    "'appended' (written as a new entry at `path`:`line`), 'reinforced' (an equivalent memory already "
    "existed; it was confirmed, nothing duplicated), 'replaced' (it updated an older conflicting entry) or "
    "'rejected' (not written: noise, a question, too vague, or it looks like a secret or personal data; "
    "`reason` says which). A 'replaced' or 'reinforced' result says what changed: `previous` is the entry "
    "as it was (the text replaced, or the entry that absorbed this memory) and `history_id` the record the "
    "user can take it back with (`memoryd undo ID`); tell the user when a replace was not what they meant. "
    "Writes are rate-limited (a few per minute) and limited to the namespaces this session may write.",
    _obj({
        "content": {"type": "string", "minLength": 1,
                    "description": "The memory: one fact, in plain language (at most about 2 KB)."},
        "type": {"type": "string", "enum": list(TYPES),
                 "description": "What kind of memory it is. Omit to let memoryd decide from the wording."},
        "namespace": {"type": "string", "pattern": NAMESPACE,
                      "description": "Where it belongs: 'default' (the shared memory), 'agent:ID', 'peer:ID' "
                                     "or 'group:ID'. Omit to use this session's own namespace."},
    }, ("content",)),
    _out({
        "decision": {"type": "string", "enum": ["appended", "reinforced", "replaced", "rejected"]},
        "reason": _STR, "path": _STR, "line": _INT, "citation": _STR, "namespace": _STR,
        "score": _NUM, "previous": _PREVIOUS, "reinforcement": _INT, "related": {"type": "object"},
        "history_id": _UNDO_ID, "type": _STR, "section": _STR, "scope": _STR, "importance": _INT,
        "routed_by": _STR, "rule": _STR, "stage": _STR,
    }, ("decision",)),
    method="remember", destructive=True, idempotent=False,  # 'replaced' overwrites an older entry
)

STATUS = ToolSpec(
    "memory_status", "Memory index status",
    "Check whether the memory index is up to date before relying on a search that came back empty: "
    "`fresh` is true when every saved change is searchable; `pending` counts files still waiting to be "
    "(re)indexed; `reconciling` is true during a full rescan; `lastEvent` is when the last file change was "
    "seen; `roots` lists the memory folders and whether each is being watched. Takes no arguments.",
    _obj({}),
    _out({
        "fresh": _BOOL, "files": _opt("integer"), "chunks": _opt("integer"), "pending": _opt("integer"),
        "reconciling": _opt("boolean"), "lastEvent": _opt("string"), "lastReconcile": _opt("string"),
        "lastError": _opt("string"), "skippedFiles": _INT,
        "roots": {"type": "array", "items": _out({"path": _opt("string"), "watched": _BOOL,
                                                  "error": _opt("string")})},
        "model": _opt("string"), "version": _opt("string"),
    }),
    method="status",
)

LIST = ToolSpec(
    "memory_list", "List memory entries",
    "List the stored memory entries (read-only), in file order, each with its `path`, line span (`startLine`-"
    "`endLine`, also as `citation`), `text`, `type` (instruction, decision, pattern, preference, entity, journal, "
    "or null), `reinforcements` and dates (`created`, `updated`). Use it to review what is stored, e.g. before "
    "cleaning up or to find an entry to promote; use memory_search to find memories by meaning. Only the "
    "namespaces this session may read are listed. When `nextCursor` is set, call again with it as `cursor` for "
    "the next page.",
    _obj({
        "namespace": _READ_NS,
        "type": {"type": "string", "enum": list(TYPES),
                 "description": "Only entries of this type. Omit to list every type."},
        "since": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$",
                  "description": "Only entries dated on or after this day (YYYY-MM-DD). Omit for no lower bound."},
        "until": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$",
                  "description": "Only entries dated on or before this day (YYYY-MM-DD). Omit for no upper bound."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50,
                  "description": "Entries per page (1-200; default 50)."},
        "cursor": {"type": "string", "minLength": 1, "maxLength": 4200,
                   "description": "The previous page's `nextCursor`, to continue after it. Omit for the first page."},
    }),
    _out({
        "entries": {"type": "array", "items": _out({
            "path": _STR, "startLine": _INT, "endLine": _INT, "text": _STR, "citation": _STR,
            "namespace": _opt("string"), "type": _opt("string"), "section": _opt("string"),
            "importance": _opt("number"), "reinforcements": _opt("integer"), "created": _opt("string"),
            "updated": _opt("string")}, ("path", "startLine", "endLine", "text", "citation"))},
        "nextCursor": _opt("string"),
    }),
    method="list",
)

UPDATE_SECTION = ToolSpec(
    "memory_update_section", "Replace a section of a memory file",
    "Replace the whole body of one named section of a memory file with new text, for sections kept current "
    "rather than appended to (by default: Current Focus, Active Context, Next Steps, Open Questions, Progress; "
    "the user configures the list). The old body is kept in memoryd's history and the user can undo the "
    "change. Refused for other sections, for a section holding the user's own block, for files outside this "
    "session's namespace, and for text that looks like a secret. Returns `decision` ('updated', 'unchanged' or "
    "'rejected'), the `path` and the heading's `line`.",
    _obj({
        "path": {"type": "string", "minLength": 1,
                 "description": "The file, relative to the memory folder, e.g. 'memory-bank/activeContext.md'."},
        "section": {"type": "string", "minLength": 1, "maxLength": 200,
                    "description": "The section's heading title, without the #s, e.g. 'Current Focus'."},
        "content": {"type": "string",
                    "description": "The new body in Markdown (no headings of the section's level or higher)."},
    }, ("path", "section", "content")),
    _out({
        "decision": {"type": "string", "enum": ["updated", "unchanged", "rejected"]},
        "reason": _STR, "path": _STR, "line": _INT, "citation": _STR, "section": _STR, "history_id": _STR,
        "rule": _STR, "stage": _STR,
    }, ("decision",)),
    method="update_section", destructive=True, idempotent=True,  # the same body twice is 'unchanged'
)

PROMOTE = ToolSpec(
    "memory_promote", "Promote a memory to the shared memory",
    "Copy one entry from a peer's or a group's memory (peers/ID/, groups/ID/) into the user's own memory, with "
    "a back-reference '(from PATH)' to where it came from. The copy goes through the quality gate, the privacy "
    "filter and dedup: if the user's memory already holds it, it is reinforced instead of duplicated. The "
    "source is not changed. Owner sessions only. Returns `decision` ('appended', 'reinforced', 'replaced' or "
    "'rejected') and where it was written; a 'replaced' or 'reinforced' one also the entry as it was "
    "(`previous`) and the undo id (`history_id`).",
    _obj({
        "path": {"type": "string", "minLength": 1,
                 "description": "The source file, e.g. 'peers/alice/MEMORY.md' (as memory_list shows it)."},
        "line": {"type": "integer", "minimum": 1, "description": "The entry's first line (its startLine)."},
        "text": {"type": "string", "minLength": 1,
                 "description": "The entry's text as memory_list showed it: refused if the line now holds another."},
        "to": {"type": "string", "pattern": rf"^(default|agent:{ID})$", "default": "default",
               "description": "Where to copy it: 'default' (the shared memory; the default) or 'agent:ID'."},
        "type": {"type": "string", "enum": list(TYPES),
                 "description": "What kind of memory it is. Omit to let memoryd decide from the wording."},
    }, ("path", "line", "text")),
    _out({
        "decision": {"type": "string", "enum": ["appended", "reinforced", "replaced", "rejected"]},
        "reason": _STR, "path": _STR, "line": _INT, "citation": _STR, "namespace": _STR, "history_id": _UNDO_ID,
        "previous": _PREVIOUS, "reinforcement": _INT, "source": {"type": "object"}, "rule": _STR, "stage": _STR,
    }, ("decision",)),
    method="promote", idempotent=False,  # a second promote reinforces the copy
)

BANK_PROPOSE = ToolSpec(
    "memory_bank_propose", "Propose a Memory Bank write",
    "After finishing a task, ask whether the conversation settled something worth writing to the Memory "
    "Bank (a requirement, a decision, a lesson learned, a design note, the current focus, a standing "
    "instruction). Pass the recent turns; you get back `text`, a 💾 proposal naming the target file and "
    "the points, to show the user at the end of your reply as it is, or an empty `text` when there is "
    "nothing to propose (then show nothing). Nothing is written: when the user answers with a confirm word "
    "(好 / 写 / yes / ok) the context hook writes it; a reject word (不用 / 跳过 / no / skip) or no answer "
    "skips it. Do not propose again in the turn right after a proposal.",
    _obj({
        "transcript": {"type": "string", "minLength": 1, "maxLength": 200_000,
                       "description": "The recent turns, one per line as 'user: …' / 'assistant: …' (or a JSON "
                                      "messages array)."},
        "namespace": {"type": "string", "pattern": NAMESPACE,
                      "description": "Where the points would be written. Omit to use this session's own namespace."},
    }, ("transcript",)),
    _out({"text": _STR, "proposal": {"type": ["object", "null"]}}),
    method="bank_propose",
)

OBSERVE = ToolSpec(
    "memory_observe", "Hand the conversation to memoryd",
    "Hand the conversation so far to memoryd, once at the end of a task or before the context is compacted, "
    "so nothing of it is lost (not needed where memoryd's agent hooks are installed: they do it). The turns "
    "memoryd has not seen for this `session_id` are appended, secrets withheld, to a dated session note "
    "(sessions/YYYY-MM-DD-SESSION.md of the namespace) that is searchable like any memory; a re-sent "
    "conversation adds nothing. With a model configured memoryd also extracts memories from the new turns "
    "in the background, through the same checks as memory_remember. Returns the `note`, how many turns were "
    "`captured` and `seen` before, and the `extraction` state ('off', 'queued', 'nothing pending', "
    "'throttled'). It is not one of the turn's memory writes. Never mention it in the reply.",
    _obj({
        "transcript": {"type": "string", "minLength": 1, "maxLength": 200_000,
                       "description": "The conversation, one turn per line as 'user: …' / 'assistant: …' (or a "
                                      "JSON messages array, or a Claude Code / Codex JSONL transcript)."},
        "session_id": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[^\x00-\x1f\x7f]+$",
                       "description": "The conversation's id: the same for every call of one conversation. Omit to "
                                      "use this MCP connection's id (one per host session)."},
        "namespace": {"type": "string", "pattern": NAMESPACE,
                      "description": "Where the session note goes. Omit to use this session's own namespace."},
        "format": {"type": "string", "enum": list(TRANSCRIPT_FORMATS), "default": "auto",
                   "description": "The transcript's format; 'auto' (the default) recognises each of them."},
        "final": {"type": "boolean", "default": False,
                  "description": "True when the conversation has ended: its extraction is not held back by the "
                                 "per-agent throttle (default false)."},
    }, ("transcript",)),
    _out({
        "note": _STR, "captured": _INT, "seen": _INT, "bytes": _INT, "withheld_lines": _INT, "pending": _INT,
        "expired": {"type": "array", "items": _STR}, "extraction": {"type": "object"},
    }, ("note", "captured", "seen", "extraction")),
    method="observe", destructive=True, idempotent=True, turn=False,  # retention deletes whole old notes
)

TOOLS: tuple[ToolSpec, ...] = (SEARCH, GET, CONTEXT, REMEMBER, STATUS, LIST, UPDATE_SECTION, PROMOTE, BANK_PROPOSE,
                               OBSERVE)
OWNER_TOOLS = frozenset({UPDATE_SECTION.name, PROMOTE.name})
"""Tools only the owner may use (seed 003: update_* and promote): not listed to a confined session."""
BY_NAME = {t.name: t for t in TOOLS}
_NOT_BLANK = {"query", "content", "path", "transcript", "session_id"}


def check_arguments(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` if they fit ``spec.schema``; else :class:`ToolError` naming the argument at fault."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(spec.schema).iter_errors(args))
    if error is not None:
        raise ToolError(f"{spec.name}: invalid arguments: {_explain(spec, error)}")
    for key in _NOT_BLANK & args.keys():
        if not args[key].strip():
            raise ToolError(f"{spec.name}: invalid arguments: '{key}' must not be blank")
    return args


def _explain(spec: ToolSpec, error: Any) -> str:
    allowed = ", ".join(spec.schema["properties"]) or "none"
    if error.validator == "required":
        return f"{error.message.replace(' is a required property', '')} is required (arguments: {allowed})"
    if error.validator == "additionalProperties":
        return f"{error.message} (arguments: {allowed})"
    if error.validator == "type" and not error.path:
        return "the arguments must be a JSON object"
    where = ".".join(str(p) for p in error.path)
    detail = spec.schema["properties"].get(where, {}).get("description", "")
    return f"'{where}': {error.message}" + (f" — {detail}" if detail else "")
