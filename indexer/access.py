"""Scoped access (docs/security.md, docs/security/paths.md): who may read or change which memories.

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
absolute paths, symlinks (of the file or of any folder under the root), hard
links and non-``.md`` targets.

Reads are decided on where a name *leads* (:class:`memoryd.indexer.pathguard.Resolved`):
:func:`read_refusal` allows a confined session a file only when both the name as
spelt and the name resolved lie in its namespace of the first root, and the
file has no second hard link (whose other name may be anywhere). Namespaces
compare case-sensitively, as the file system does.

:data:`MATRIX` and :func:`authorize` are the one place the rules live; the
socket methods (``remember``, ``forget``, ``audit``, and the reads ``search``,
``get``, ``context``) call them and nothing else decides.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memoryd.indexer.errors import AccessDenied, BadTarget, SessionError
from memoryd.indexer.pathguard import Resolved, check_text, normalize, shown

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


#: How a bound uid's session is written in ``server.allowed_uids`` (docs/security/transport.md).
BINDING_FORM = '"peer:ID" (a direct session of peer ID) or "group:ID" (a group session)'


def parse_binding(text: object) -> Session:
    """The fixed session a ``server.allowed_uids`` value names: ``peer:ID`` → direct, ``group:ID`` → group.

    Another uid is never the owner and never picks its session, so only the two confined
    kinds can be written here. Raises :class:`SessionError`.
    """
    kind, sep, ident = text.partition(":") if isinstance(text, str) else ("", "", "")
    if not sep or kind not in ("peer", "group"):
        raise SessionError(f"a bound session must be {BINDING_FORM}, got {str(text)[:80]!r}")
    if kind == "peer":
        return Session(DIRECT, peer=_check_id(ident, "the peer id"))
    return Session(GROUP, group=_check_id(ident, "the group id"))


def binding_text(session: Session) -> str:
    """``peer:ID`` or ``group:ID``: a confined session as :func:`parse_binding` reads it."""
    return f"peer:{session.peer}" if session.kind == DIRECT else f"group:{session.group}"


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
    if requested is not None:
        requested = _checked_prefix(requested)
    allowed = read_prefix(session, first_root)
    if allowed is None or requested is None:
        return requested if allowed is None else allowed
    wanted = requested if os.path.isabs(requested) else f"{Path(os.path.abspath(first_root))}/{requested}"
    if wanted.startswith(allowed):
        return wanted
    if allowed.startswith(wanted):
        return allowed
    raise AccessDenied(f"a {session.kind} session may only search {allowed}")


def _checked_prefix(requested: str) -> str:
    """A ``path_prefix`` through the resolver's text rules (no NUL, no ``..``, sane length); a
    trailing ``/`` is kept (it means "this folder only")."""
    norm = normalize(requested, "path_prefix")
    return norm + "/" if requested.endswith("/") and norm not in ("", "/") else norm


def read_refusal(session: Session, first_root: Path, r: Resolved) -> str | None:
    """Why ``session`` may not read the resolved name ``r`` (None: it may).

    The owner reads anything inside the roots. A confined session reads a file only
    when the name as spelt *and* the name resolved both lie in its own namespace of
    the first root (a symlink between namespaces is refused in both directions), and
    the file has a single hard link (another name of the same inode cannot be proven
    to lie in the same namespace).
    """
    if r.real_root is None or r.real_rel is None:
        return f"{shown(r.rel)} resolves outside every memory root"
    if session.kind == OWNER:
        return None
    ns = own_namespace(session)
    if ns is None:  # pragma: no cover - parse_session never builds such a session
        return "session has no namespace"
    first, folder = os.path.abspath(first_root), f"{ns.folder}/"
    if not _in_folder(first, folder, r.root, r.rel):
        return f"a {session.kind} session may not read {r.rel}"
    if not _in_folder(first, folder, r.real_root, r.real_rel):
        return f"a {session.kind} session may not read {r.rel}: it is a link out of its namespace"
    if r.links > 1:
        return f"a {session.kind} session may not read {r.rel}: the file has {r.links} hard links"
    return None


def _in_folder(first: str, folder: str, root: Path, rel: str) -> bool:
    """``rel`` under ``root`` lies strictly inside ``folder`` of the first root (normalized paths; exact case).

    The same answer as ``namespace_of(rel) == own`` for the names the resolver makes (no ``.``, ``..``
    or empty parts), at string speed: a search asks it for every candidate file.
    """
    return os.path.abspath(root) == first and rel.startswith(folder) and len(rel) > len(folder)


def can_read(session: Session, first_root: Path, root: Path, rel: str) -> bool:
    """May ``session`` read ``rel`` under ``root``? Non-owners only their folder of the first root."""
    if session.kind == OWNER:
        return True
    return Path(os.path.abspath(root)) == Path(os.path.abspath(first_root)) and namespace_of(rel) == own_namespace(
        session)


def check_relative(rel: str) -> str:
    """Validate a root-relative target path: posix, relative, no ``.``/``..``/empty parts, ends in ``.md``."""
    if not rel or "\\" in rel or "\x00" in rel or rel.startswith("/") or os.path.isabs(rel):
        raise BadTarget(f"{shown(rel)}: target paths must be relative to the memory root")
    check_text(rel, "target path")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadTarget(f"{rel[:200]!r}: '..', '.' and empty path parts are refused")
    if not rel.endswith(".md"):
        raise BadTarget(f"{rel[:200]!r}: memoryd only writes .md files")
    return rel


def resolve_target(root: Path, rel: str) -> Path:
    """The absolute path of ``rel`` under ``root``, refusing anything that could leave it.

    No component under the root may be a symlink: not the file (a rename would
    replace the link), and not a folder (``peers/alice -> ../bob`` would make
    alice's writes land in bob's namespace; the walk that indexes the roots does not
    follow folder links either). An existing file must be a regular file with one
    hard link (a rename would silently split the two names, and the other name may
    belong to another namespace). Raises :class:`BadTarget`.
    """
    check_relative(rel)
    path = Path(root) / rel
    probe = Path(root)
    for part in rel.split("/"):
        probe = probe / part
        try:
            st = os.lstat(probe)
        except FileNotFoundError:
            break
        except OSError as exc:
            raise BadTarget(f"{shown(rel)}: cannot be checked ({exc.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            raise BadTarget(f"{shown(rel)}: {probe.relative_to(root).as_posix()} is a symlink; "
                            "memoryd does not write through links")
        if probe != path and not stat.S_ISDIR(st.st_mode):
            raise BadTarget(f"{shown(rel)}: {probe.relative_to(root).as_posix()} is not a folder")
        if probe == path and not stat.S_ISREG(st.st_mode):
            raise BadTarget(f"{shown(rel)}: exists and is not a regular file")
        if probe == path and st.st_nlink > 1:
            raise BadTarget(f"{shown(rel)}: has {st.st_nlink} hard links; memoryd does not write through links")
    return path
