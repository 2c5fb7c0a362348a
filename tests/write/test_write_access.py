"""The permission matrix (docs/security.md) — every session kind × action × namespace — and path safety."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.indexer.access import (
    ACTIONS,
    AUDIT,
    DEFAULT,
    FORGET,
    READ,
    REMEMBER,
    Namespace,
    Session,
    authorize,
    can_read,
    namespace_of,
    parse_namespace,
    parse_session,
    read_prefix,
    resolve_target,
    scoped_prefix,
)
from memoryd.indexer.errors import AccessDenied, BadTarget, SessionError

OWNER = Session("owner")
ALICE = Session("direct", peer="alice")
TEAM = Session("group", group="team")
NAMESPACES = {"default": DEFAULT, "agent:coder": Namespace("agent", "coder"), "peer:alice": Namespace("peer", "alice"),
              "peer:bob": Namespace("peer", "bob"), "group:team": Namespace("group", "team"),
              "group:other": Namespace("group", "other")}

# (session, action, namespace) → allowed? Every combination is listed: nothing is left to a default.
ALLOWED = {
    ("owner", a, ns) for a in ACTIONS for ns in NAMESPACES
} | {
    ("alice", READ, "peer:alice"), ("alice", REMEMBER, "peer:alice"),
    ("team", READ, "group:team"), ("team", REMEMBER, "group:team"),
}
SESSIONS = {"owner": OWNER, "alice": ALICE, "team": TEAM}


@pytest.mark.parametrize("who", SESSIONS)
@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("ns", NAMESPACES)
def test_permission_matrix(who: str, action: str, ns: str) -> None:
    session, namespace = SESSIONS[who], NAMESPACES[ns]
    if (who, action, ns) in ALLOWED:
        authorize(session, action, namespace)
    else:
        with pytest.raises(AccessDenied, match=f"a {session.kind} session may not {action}"):
            authorize(session, action, namespace)


@pytest.mark.parametrize(("session", "allowed"), [(OWNER, True), (ALICE, False), (TEAM, False)])
def test_actions_without_a_namespace(session: Session, allowed: bool) -> None:
    for action in (AUDIT, FORGET):
        if allowed:
            authorize(session, action)
        else:
            with pytest.raises(AccessDenied):
                authorize(session, action)


def test_reads_are_confined_to_the_first_root_folder(tmp_path: Path) -> None:
    first, other = tmp_path / "a", tmp_path / "b"
    assert read_prefix(OWNER, first) is None
    assert read_prefix(ALICE, first) == f"{first}/peers/alice/"
    assert read_prefix(TEAM, first) == f"{first}/groups/team/"
    cases = [(ALICE, first, "peers/alice/MEMORY.md", True), (ALICE, first, "peers/bob/MEMORY.md", False),
             (ALICE, first, "MEMORY.md", False), (ALICE, other, "peers/alice/MEMORY.md", False),
             (TEAM, first, "groups/team/notes/x.md", True), (TEAM, first, "peers/alice/MEMORY.md", False),
             (OWNER, other, "anything.md", True)]
    for session, root, rel, ok in cases:
        assert can_read(session, first, root, rel) is ok, (session, root, rel)


@pytest.mark.parametrize(("raw", "owner_allowed", "expected"), [
    (None, True, Session("owner")),
    ({"kind": "owner", "turn": 7}, True, Session("owner", turn="7")),
    ({"kind": "direct", "peer": "alice", "turn": "t-1"}, False, Session("direct", peer="alice", turn="t-1")),
    ({"kind": "group", "group": "g.team_1"}, True, Session("group", group="g.team_1")),
])
def test_parse_session(raw: object, owner_allowed: bool, expected: Session) -> None:
    assert parse_session(raw, owner_allowed=owner_allowed) == expected


@pytest.mark.parametrize("raw", [
    "owner", ["owner"], {"kind": "root"}, {"kind": "direct"}, {"kind": "direct", "peer": "../etc"},
    {"kind": "direct", "peer": "a/b"}, {"kind": "direct", "peer": ""}, {"kind": "direct", "peer": "x" * 65},
    {"kind": "group", "group": "g", "peer": "p"}, {"kind": "owner", "peer": "p"}, {"kind": "direct", "peer": "a..b"},
    {"kind": "owner", "turn": True}, {"kind": "owner", "turn": "t" * 129}, {"kind": "owner", "admin": True},
    {"kind": "group", "group": "用户"},
])
def test_malformed_sessions_are_refused(raw: object) -> None:
    with pytest.raises(SessionError):
        parse_session(raw, owner_allowed=True)


def test_owner_sessions_only_from_the_daemons_uid() -> None:
    for raw in (None, {"kind": "owner"}):
        with pytest.raises(AccessDenied, match="own uid"):
            parse_session(raw, owner_allowed=False)


def test_namespaces() -> None:
    assert parse_namespace(None, OWNER) == DEFAULT and parse_namespace(None, ALICE) == Namespace("peer", "alice")
    assert parse_namespace("default", TEAM) == DEFAULT  # parsed; authorize() then refuses it
    assert str(parse_namespace("agent:coder", OWNER)) == "agent:coder"
    assert Namespace("group", "team").folder == "groups/team" and DEFAULT.folder == ""
    for bad in ("peer:", "peer:../x", "peer:a/b", "user:x", "peers/alice", "/abs", "group:.."):
        with pytest.raises(BadTarget):
            parse_namespace(bad, OWNER)
    assert namespace_of("peers/alice/MEMORY.md") == Namespace("peer", "alice")
    assert namespace_of("peers/alice.md") == DEFAULT and namespace_of("user/preferences.md") == DEFAULT


@pytest.mark.parametrize("rel", ["../x.md", "a/../../x.md", "/etc/x.md", "a//b.md", "./a.md", "a/./b.md",
                                 "notes.txt", "MEMORY.MD.bak", "", "a\\b.md", "a\x00.md", "dir/"])
def test_unsafe_targets_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(BadTarget):
        resolve_target(tmp_path, rel)


def test_symlinks_are_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "x.md").write_text("- x\n")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "x.md", root / "link.md")
    (root / "dir.md").mkdir()
    for rel in ("escape/x.md", "escape/new/deeper.md", "link.md", "dir.md"):
        with pytest.raises(BadTarget):
            resolve_target(root, rel)
    assert resolve_target(root, "peers/alice/MEMORY.md") == root / "peers/alice/MEMORY.md"


def test_search_prefixes_are_narrowed_to_the_session_folder(tmp_path: Path) -> None:
    root = tmp_path / "r"
    assert scoped_prefix(OWNER, root, None) is None and scoped_prefix(OWNER, root, "x/") == "x/"
    assert scoped_prefix(ALICE, root, None) == f"{root}/peers/alice/"
    assert scoped_prefix(ALICE, root, "peers/") == f"{root}/peers/alice/"  # wider: narrowed
    assert scoped_prefix(ALICE, root, "peers/alice/2024") == f"{root}/peers/alice/2024"  # inside: kept
    assert scoped_prefix(TEAM, root, f"{root}/groups/team/x") == f"{root}/groups/team/x"
    for outside in ("peers/bob/", "MEMORY.md", "/etc/", f"{root}/groups/other/"):
        with pytest.raises(AccessDenied):
            scoped_prefix(ALICE if "groups" not in outside else TEAM, root, outside)
