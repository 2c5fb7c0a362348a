"""Scoped access (seed 003): who may read or change which memories.

A request carries a *session*:

* ``owner`` — the user (the default for the daemon's own uid): everything;
* ``direct`` with a ``peer`` id — a one-to-one conversation with an outside
  agent: may read its peer folder and write its peer ``MEMORY.md``;
* ``group`` with a ``group`` id — a group conversation: may read and write
  only its group folder.

Memories live in *namespaces*, folders under the first root: ``default`` (the
root itself, minus the folders below), ``agent:ID`` → ``agents/ID``,
``peer:ID`` → ``peers/ID``, ``group:ID`` → ``groups/ID``. Paths are only ever
derived from these logical ids; :func:`resolve_target` refuses ``..``,
absolute paths, symlinks and non-``.md`` targets.

:data:`MATRIX` and :func:`authorize` are the one place the rules live; the
socket methods (``remember``, ``forget``, ``audit``, and the reads ``search``,
``get``, ``context``) call them and nothing else decides.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from indexer.write.errors import AccessDenied, BadTarget, SessionError

OWNER, DIRECT, GROUP = "owner", "direct", "group"
READ, REMEMBER, FORGET, AUDIT = "read", "remember", "forget", "audit"
ACTIONS = (READ, REMEMBER, FORGET, AUDIT)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FOLDERS = {"agent": "agents", "peer": "peers", "group": "groups"}
NAMESPACE_FOLDERS = _FOLDERS  #: namespace kind → its folder under the first root

#: (session kind, action) → which namespaces: "any", "own" (its peer/group namespace) or "none".
MATRIX: dict[tuple[str, str], str] = {
    (OWNER, READ): "any", (OWNER, REMEMBER): "any", (OWNER, FORGET): "any", (OWNER, AUDIT): "any",
    (DIRECT, READ): "own", (DIRECT, REMEMBER): "own", (DIRECT, FORGET): "none", (DIRECT, AUDIT): "none",
    (GROUP, READ): "own", (GROUP, REMEMBER): "own", (GROUP, FORGET): "none", (GROUP, AUDIT): "none",
}


@dataclass(frozen=True)
class Session:
    kind: str
    peer: str | None = None
    group: str | None = None
    turn: str | None = None

    @property
    def key(self) -> str:
        """The identity rate limits are counted per: ``owner``, ``direct:ID`` or ``group:ID``."""
        return {OWNER: OWNER, DIRECT: f"direct:{self.peer}", GROUP: f"group:{self.group}"}[self.kind]

    def describe(self) -> dict[str, str]:
        out = {"kind": self.kind}
        for name in ("peer", "group", "turn"):
            if getattr(self, name) is not None:
                out[name] = str(getattr(self, name))
        return out


@dataclass(frozen=True)
class Namespace:
    kind: str  # "default" | "agent" | "peer" | "group"
    id: str = ""

    @property
    def folder(self) -> str:
        """Relative posix folder under the first root ("" for the default namespace)."""
        return "" if self.kind == "default" else f"{_FOLDERS[self.kind]}/{self.id}"

    @property
    def layout(self) -> str:
        return "single" if self.kind in ("peer", "group") else "files"

    def __str__(self) -> str:
        return "default" if self.kind == "default" else f"{self.kind}:{self.id}"


DEFAULT = Namespace("default")


def parse_session(raw: object, *, owner_allowed: bool) -> Session:
    """A session from request params (None = owner). ``owner_allowed``: the caller's uid is the daemon's.

    Raises :class:`SessionError` for a malformed session, :class:`AccessDenied` for an
    owner claim from another uid.
    """
    if raw is None:
        raw = {"kind": OWNER}
    if not isinstance(raw, dict):
        raise SessionError("param 'session' must be an object {kind, peer?, group?, turn?}")
    unknown = set(raw) - {"kind", "peer", "group", "turn"}
    if unknown:
        raise SessionError(f"session: unknown field {sorted(unknown)[0]!r}")
    kind, peer, group, turn = raw.get("kind"), raw.get("peer"), raw.get("group"), raw.get("turn")
    if turn is not None and (not isinstance(turn, str | int) or isinstance(turn, bool) or len(str(turn)) > 128):
        raise SessionError("session.turn must be a string or integer (at most 128 characters)")
    turn = None if turn is None else str(turn)
    if kind == OWNER and peer is None and group is None:
        if not owner_allowed:
            raise AccessDenied("an owner session is only accepted from the daemon's own uid")
        return Session(OWNER, turn=turn)
    if kind == DIRECT and group is None:
        return Session(DIRECT, peer=_check_id(peer, "session.peer"), turn=turn)
    if kind == GROUP and peer is None:
        return Session(GROUP, group=_check_id(group, "session.group"), turn=turn)
    raise SessionError("session must be {kind: 'owner'}, {kind: 'direct', peer} or {kind: 'group', group}")


def _check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise SessionError(f"{what} must match {_ID.pattern} (got {str(value)[:80]!r})")
    return value


def parse_namespace(raw: str | None, session: Session) -> Namespace:
    """``default``, ``agent:ID``, ``peer:ID`` or ``group:ID``; None means the session's own namespace."""
    if raw is None or raw == "":
        return own_namespace(session) or DEFAULT
    if raw == "default":
        return DEFAULT
    kind, sep, ident = raw.partition(":")
    if not sep or kind not in _FOLDERS or not _ID.fullmatch(ident) or ".." in ident:
        raise BadTarget(f"namespace {raw[:80]!r} must be 'default', 'agent:ID', 'peer:ID' or 'group:ID'")
    return Namespace(kind, ident)


def own_namespace(session: Session) -> Namespace | None:
    if session.kind == DIRECT and session.peer:
        return Namespace("peer", session.peer)
    if session.kind == GROUP and session.group:
        return Namespace("group", session.group)
    return None


def authorize(session: Session, action: str, namespace: Namespace | None = None) -> None:
    """Raise :class:`AccessDenied` unless :data:`MATRIX` allows ``action`` on ``namespace``."""
    scope = MATRIX.get((session.kind, action), "none")
    if scope == "any":
        return
    if scope == "own" and namespace is not None and namespace == own_namespace(session):
        return
    where = f" in namespace {namespace}" if namespace is not None else ""
    raise AccessDenied(f"a {session.kind} session may not {action}{where}")


def namespace_of(rel: str) -> Namespace:
    """The namespace a root-relative path belongs to (by its first two folders)."""
    parts = PurePosixPath(rel).parts
    for kind, folder in _FOLDERS.items():
        if len(parts) >= 3 and parts[0] == folder and _ID.fullmatch(parts[1]):
            return Namespace(kind, parts[1])
    return DEFAULT


def read_prefix(session: Session, root: Path) -> str | None:
    """The absolute path prefix a session's reads are confined to (None: no limit, the owner)."""
    ns = own_namespace(session)
    if session.kind == OWNER:
        return None
    if ns is None:  # pragma: no cover - parse_session never builds such a session
        raise AccessDenied("session has no namespace")
    return f"{Path(os.path.abspath(root)) / ns.folder}/"


def scoped_prefix(session: Session, first_root: Path, requested: str | None) -> str | None:
    """The ``path_prefix`` a search may use: the request's own, narrowed to the session's folder.

    Owners get ``requested`` unchanged. Others get their folder's absolute prefix, or
    ``requested`` (relative to the first root, or absolute) when it lies inside that
    folder; a prefix wider than the folder is narrowed to it, one outside it is
    refused with :class:`AccessDenied`.
    """
    allowed = read_prefix(session, first_root)
    if allowed is None or requested is None:
        return requested if allowed is None else allowed
    wanted = requested if os.path.isabs(requested) else f"{Path(os.path.abspath(first_root))}/{requested}"
    if wanted.startswith(allowed):
        return wanted
    if allowed.startswith(wanted):
        return allowed
    raise AccessDenied(f"a {session.kind} session may only search {allowed}")


def can_read(session: Session, first_root: Path, root: Path, rel: str) -> bool:
    """May ``session`` read ``rel`` under ``root``? Non-owners only their folder of the first root."""
    if session.kind == OWNER:
        return True
    return Path(os.path.abspath(root)) == Path(os.path.abspath(first_root)) and namespace_of(rel) == own_namespace(
        session)


def check_relative(rel: str) -> str:
    """Validate a root-relative target path: posix, relative, no ``.``/``..``/empty parts, ends in ``.md``."""
    if not rel or "\\" in rel or "\x00" in rel or rel.startswith("/") or os.path.isabs(rel):
        raise BadTarget(f"{rel[:200]!r}: target paths must be relative to the memory root")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadTarget(f"{rel[:200]!r}: '..', '.' and empty path parts are refused")
    if not rel.endswith(".md"):
        raise BadTarget(f"{rel[:200]!r}: memoryd only writes .md files")
    return rel


def resolve_target(root: Path, rel: str) -> Path:
    """The absolute path of ``rel`` under ``root``, refusing anything that could leave it.

    The file itself must not be a symlink (a rename would replace the link), and
    no existing parent may resolve outside the root. Raises :class:`BadTarget`.
    """
    check_relative(rel)
    root_real = os.path.realpath(root)
    path = Path(root) / rel
    if path.is_symlink():
        raise BadTarget(f"{rel}: is a symlink; memoryd does not write through links")
    probe = path
    while not probe.exists() and probe != Path(root):
        probe = probe.parent
    real = os.path.realpath(probe)
    if real != root_real and not real.startswith(root_real + os.sep):
        raise BadTarget(f"{rel}: resolves outside the memory root")
    if path.exists() and not path.is_file():
        raise BadTarget(f"{rel}: exists and is not a regular file")
    return path
