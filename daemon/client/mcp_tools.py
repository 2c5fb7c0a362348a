"""The MCP tools of ``memoryd mcp``: what a model sees (names, descriptions, JSON schemas).

Pure data and small pure functions, no SDK import, so that the schemas and the
argument checks can be tested without spawning anything. The descriptions are
written for a model to read: when to call the tool, what comes back, and what
each argument does. Every schema is closed (``additionalProperties: false``) so
a misspelt argument is refused instead of silently ignored.

:func:`check_arguments` raises :class:`ToolError` with a message that names the
argument at fault; :mod:`memoryd.daemon.client.mcp_server` turns it into an MCP tool error
(``isError: true``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.daemon.client.cli_write import TYPES

# memoryd.indexer.write.access's id rule, repeated here so the schema can state it.
ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAMESPACE = rf"^(default|(agent|peer|group):{ID})$"
MODES = ("hybrid", "vector", "keyword")
MAX_QUERY_CHARS = 8192  # memoryd.daemon.api.requests.MAX_QUERY_CHARS (the bridge does not load the server side)


class ToolError(Exception):
    """A tool call that cannot be answered; ``str()`` is the message the model reads."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool = True


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_QUERY = {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
          "description": "What to look for: a question or keywords, in any language."}
_READ_NS = {"type": "string", "pattern": NAMESPACE,
            "description": "Only read one namespace: 'default' (the shared memory, outside the agents/, peers/ "
                           "and groups/ folders), 'agent:ID' (agents/ID/), 'peer:ID' (peers/ID/) or 'group:ID' "
                           "(groups/ID/). Omit to read all memory this session may read."}

SEARCH = ToolSpec(
    "memory_search", "Search memory",
    "Search the Markdown memory files (MEMORY.md, memory/YYYY-MM-DD.md daily notes, memory-bank/, notes) "
    "with hybrid semantic + keyword search. Call it before answering questions about prior work, decisions, "
    "dates, people, preferences or todos. The index is live: a file saved a few seconds ago is included. "
    "Returns the best snippets, best first, each with its file `path`, line span (`startLine`-`endLine`, "
    "also as `citation` \"path:start-end\") and a relevance `score` (0-1, higher is better). To read more "
    "around a hit, call memory_get with its path and from=startLine. No results means nothing relevant is "
    "stored.",
    _obj({
        "query": _QUERY,
        "k": {"type": "integer", "minimum": 1, "maximum": 50,
              "description": "How many snippets to return (1-50; default 8 unless configured otherwise)."},
        "namespace": _READ_NS,
        "mode": {"type": "string", "enum": list(MODES),
                 "description": "'hybrid' (default; best for most questions), 'vector' (meaning only, for "
                                "paraphrases) or 'keyword' (exact words: names, identifiers, error messages)."},
        "sites": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                  "description": "Only with a shared (PostgreSQL) memory: search only these machines' memory, "
                                 "by site id; 'self' is this machine. Omit to search every site."},
    }, ("query",)),
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
                  "description": "Number of lines to return (default: to the end of the file)."},
    }, ("path",)),
)

CONTEXT = ToolSpec(
    "memory_context", "Load relevant memories",
    "Get one ready-to-use Markdown block of the memories most relevant to `query`, fitted to a token budget. "
    "Use it at the start of a task to load background in one call instead of several searches. Each section "
    "is headed by its source `path:start-end`. Returns an empty block when nothing relevant is stored.",
    _obj({
        "query": _QUERY,
        "max_tokens": {"type": "integer", "minimum": 16, "maximum": 100000,
                       "description": "Budget for the whole block in model tokens (16-100000; about 4 "
                                      "characters of English per token). 500-2000 suits most tasks."},
        "namespace": _READ_NS,
    }, ("query", "max_tokens")),
)

REMEMBER = ToolSpec(
    "memory_remember", "Save a memory",
    "Save one durable fact to memory: a decision, preference, instruction, pattern, entity or journal note. "
    "Write one self-contained statement (who/what, and why if known), never secrets, tokens or passwords. "
    "memoryd files it and checks it against what is stored. `decision` in the result says what happened: "
    "'appended' (written as a new entry at `path`:`line`), 'reinforced' (an equivalent memory already "
    "existed; it was confirmed, nothing duplicated), 'replaced' (it updated an older conflicting entry) or "
    "'rejected' (not written: noise, a question, too vague, or it looks like a secret or personal data; "
    "`reason` says which). Writes are rate-limited (a few per minute) and limited to the namespaces this "
    "session may write.",
    _obj({
        "content": {"type": "string", "minLength": 1,
                    "description": "The memory: one fact, in plain language (at most about 2 KB)."},
        "type": {"type": "string", "enum": list(TYPES),
                 "description": "What kind of memory it is; omit to let memoryd decide from the wording."},
        "namespace": {"type": "string", "pattern": NAMESPACE,
                      "description": "Where it belongs: 'default' (the shared memory), 'agent:ID', 'peer:ID' "
                                     "or 'group:ID'. Omit to use this session's own namespace."},
    }, ("content",)),
    read_only=False,
)

STATUS = ToolSpec(
    "memory_status", "Memory index status",
    "Check whether the memory index is up to date before relying on a search that came back empty: "
    "`fresh` is true when every saved change is searchable; `pending` counts files still waiting to be "
    "(re)indexed; `reconciling` is true during a full rescan; `lastEvent` is when the last file change was "
    "seen; `roots` lists the memory folders and whether each is being watched. Takes no arguments.",
    _obj({}),
)

TOOLS: tuple[ToolSpec, ...] = (SEARCH, GET, CONTEXT, REMEMBER, STATUS)
BY_NAME = {t.name: t for t in TOOLS}
_NOT_BLANK = {"query", "content", "path"}


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
