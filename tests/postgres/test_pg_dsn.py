"""No password in any message (issue #33 item 4): the DSN is redacted before anything parses it.

A property test over malformed DSNs (un-encoded ``%``, spaces, quotes, odd URIs): whatever the
password, neither it nor any word of it appears in an error, a description, the redacted form,
or the log line of a failed start. Runs without a server (a missing Unix socket refuses at once).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memoryd.indexer.errors import MemorydError
from memoryd.indexer.storage.postgres import connect
from memoryd.indexer.storage.postgres.dsn import conninfo, describe, describe_error, redact

NO_SERVER = "/nonexistent-memoryd-socket-dir"
TEMPLATES = (
    "postgresql://alice:{pw}@db.example:5432/memoryd",
    "postgresql://alice:{pw}@/memoryd?host=" + NO_SERVER,
    "postgres://alice:{pw}@%2Fnonexistent-memoryd-socket-dir/memoryd?sslmode=disable",
    "postgresql://alice@/memoryd?host=" + NO_SERVER + "&password={pw}&sslmode=disable",
    "postgresql://alice:{pw}",
    "postgresql://:{pw}@[::1/memoryd",
    "host=" + NO_SERVER + " user=alice password={pw} dbname=memoryd",
    "host=" + NO_SERVER + " password='{pw}' dbname=memoryd",
    "host=" + NO_SERVER + " password = {pw}",
    "password={pw} host=" + NO_SERVER,
    "sslpassword={pw} host=" + NO_SERVER + " user=alice",
    "host=db.example user=alice dbname=memoryd password={pw}",
)
# Passwords with the characters that break parsers: un-encoded %, spaces, quotes, backslashes, @ : / ? & = #
PIECE = st.text(alphabet="abcdefghijkXYZ0123456789", min_size=5, max_size=9)
SEP = st.sampled_from([" ", "%", "'", '"', "\\", "@", ":", "/", "?", "&", "=", "#", "%zz", "%4", "' "])
PASSWORD = st.lists(st.tuples(PIECE, SEP), min_size=1, max_size=3).map(
    lambda parts: "Pw7" + "".join(piece + sep for piece, sep in parts))


def words(password: str) -> set[str]:
    """The runs of letters and digits in the password long enough to recognise (5+)."""
    return {w for w in re.findall(r"[A-Za-z0-9]+", password) if len(w) >= 5}


def leaks(text: str, password: str) -> set[str]:
    return {w for w in words(password) if w in text}


@settings(max_examples=300, deadline=None)
@given(template=st.sampled_from(TEMPLATES), password=PASSWORD)
def test_no_message_built_from_a_dsn_shows_its_password(template: str, password: str) -> None:
    dsn = template.format(pw=password)
    assume(not any(w in template for w in words(password)))  # a word of the template is not a leak
    # "postgresql://alice:pw@x" with no host after it IS user alice, password pw, host x: no parser can tell
    assume("@" not in password or "{pw}@" in template or "=" in template.split("{pw}")[0][-10:])
    shown = [redact(dsn), describe(dsn)]
    try:
        conninfo(dsn, "disable")
    except MemorydError as exc:
        shown.append(str(exc))
    shown.append(describe_error(ValueError(f"libpq said: {dsn}"), dsn))  # an error quoting the whole DSN
    for text in shown:
        assert not leaks(text, password), (template, text)


@settings(max_examples=80, deadline=None)
@given(template=st.sampled_from([t for t in TEMPLATES if NO_SERVER in t or "%2F" in t]), password=PASSWORD)
def test_a_failed_connection_never_shows_the_password(template: str, password: str) -> None:
    dsn = template.format(pw=password)
    assume(not any(w in template for w in words(password)))
    with pytest.raises(MemorydError) as err:
        connect.connect(dsn, "disable", 2)
    assert not leaks(str(err.value), password), str(err.value)


def test_the_issue_s_two_dsns(tmp_path: Path) -> None:
    """The two reported: a URI password with an un-encoded %, a password= with an unquoted space."""
    uri = "postgresql://memoryd:s3cr%t-Passw0rd@db.internal:5432/memoryd"
    with pytest.raises(MemorydError) as err:
        conninfo(uri, "disable")
    assert "s3cr" not in str(err.value) and "Passw0rd" not in str(err.value)
    assert "percent-encode" in str(err.value)
    kv = "host=db.internal user=memoryd password=first half-Secr3tWord dbname=memoryd"
    with pytest.raises(MemorydError) as err:
        conninfo(kv, "disable")
    assert "first" not in str(err.value) and "Secr3tWord" not in str(err.value)
    assert describe(kv) == "postgresql://memoryd@db.internal/memoryd"
    assert redact(uri) == "postgresql://memoryd:***@db.internal:5432/memoryd"
    assert redact(kv) == "host=db.internal user=memoryd password=*** dbname=memoryd"
    quoted = "host=db password='a b host=c\\' d' user=u"  # a quoted value runs to its closing quote
    assert redact(quoted) == "host=db password=*** user=u"


def test_a_start_that_fails_on_a_malformed_dsn_logs_no_password(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    """``memoryd run``'s start-up failure: the message on stderr and the ``daemon.startup_failed`` event."""
    import dataclasses

    from memoryd.daemon.app import run_daemon
    from tests.helpers import make_config

    root = tmp_path / "root"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=tmp_path / "s.sock"),
                              storage=dataclasses.replace(cfg.storage, backend="postgres", sslmode="disable",
                                                          dsn="postgresql://u:Half0ne Half7wo%@db/x"))
    assert run_daemon(cfg) == 3
    out = capsys.readouterr()
    text = out.out + out.err
    assert "cannot start" in text and "Half0ne" not in text and "Half7wo" not in text
