"""DSN handling: the connection string with ``sslmode`` applied, and its password-free forms.

The password (in a URI, a ``password=`` key, or ``PGPASSWORD``/``.pgpass`` which
never pass through here) must never reach a log line, ``status`` or an error
message. libpq's parser quotes the fragment it chokes on, and a malformed DSN is
exactly where the password is least predictable (an un-encoded ``%`` in a URI, an
unquoted space in ``password=``), so :func:`redact` works on the raw text, before
anything parses it: every message about the DSN is built from the redacted form,
and :func:`describe` (``postgresql://user@host:port/dbname``) is the only form
memoryd ever shows.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memoryd.indexer.errors import ConfigError

_SECRET_KEYS = ("password", "sslpassword", "passfile", "sslkey")
MASK = "***"

# libpq's connection keywords (PostgreSQL 17): where a key=value DSN's next pair may start.
_KEYWORDS = (
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name", "fallback_application_name",
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
    "replication", "gssencmode", "sslmode", "sslnegotiation", "requiressl", "sslcompression", "sslcert",
    "sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib", "gssdelegation",
    "service", "target_session_attrs", "load_balance_hosts",
)
_NEXT_KEY = r"(?=\s+(?:" + "|".join(_KEYWORDS) + r")\s*=|\s*$)"
# key=value: the value runs to the next known keyword (an unquoted space or a stray quote in the
# password must not leave half of it behind), or to the end.
_KV_SECRET = re.compile(r"(?P<key>\b(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|.*?)" + _NEXT_KEY,
                        re.IGNORECASE | re.DOTALL)
_URI = re.compile(r"^\s*postgres(?:ql)?://", re.IGNORECASE)
# a URI's query parameters: password=... up to the next &keyword= (an un-encoded & in it stays in), or the end
_URI_PARAM = re.compile(r"(?P<key>[?&](?:ssl)?password=)(?P<value>.*?)(?=&(?:" + "|".join(_KEYWORDS) + r")=|$)",
                        re.IGNORECASE | re.DOTALL)


def redact(dsn: str) -> str:
    """``dsn`` with every password replaced by ``***``, whatever its shape: what messages are built from."""
    return _redact(dsn)[0]


def _redact(dsn: str) -> tuple[str, list[str]]:
    """The redacted DSN and the raw secret texts it removed."""
    found: list[str] = []

    def mask(m: re.Match[str]) -> str:
        if m.group("value"):
            found.append(m.group("value"))
        return m.group("key") + MASK

    if _URI.match(dsn):
        scheme_end = dsn.index("://") + 3
        rest = dsn[scheme_end:]
        # The last '@' of all: a password may hold an un-encoded '@', '?' or '/', and no parser can tell
        # where it ends, so more is masked, never less (an '@' in a query value masks the host too).
        at = rest.rfind("@")
        if at >= 0:
            user, colon, secret = rest[:at].partition(":")
            if colon and secret:
                found.append(secret)
                rest = f"{user}:{MASK}{rest[at:]}"
        else:  # no user part: a "port" that is no number is likely a password whose '@host' is missing
            port = re.match(r"[^/:?]*:(?P<value>[^/?]*)", rest)
            if port and port.group("value") and not port.group("value").isdigit():
                found.append(rest[port.start("value"):])
                return dsn[:scheme_end] + rest[:port.start("value")] + MASK, found  # the rest is unusable anyway
        return dsn[:scheme_end] + _URI_PARAM.sub(mask, rest), found
    return _KV_SECRET.sub(mask, dsn), found


def conninfo(dsn: str, sslmode: str) -> str:
    """The libpq connection string for ``dsn`` with ``sslmode`` (a DSN's own sslmode wins).

    Raises :class:`ConfigError` naming the problem as libpq sees it in the *redacted* DSN, never
    the DSN itself.
    """
    try:
        conninfo_to_dict(redact(dsn))
    except Exception as exc:  # psycopg.ProgrammingError; its text quotes the (redacted) DSN
        raise ConfigError(f"storage.dsn is not a valid PostgreSQL DSN ({_first_line(exc)})") from None
    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # only the password makes it fail: say so, without libpq's words
        raise ConfigError("storage.dsn is not a valid PostgreSQL DSN (its password cannot be parsed: in a URI,"
                          " percent-encode it, e.g. % as %25 and @ as %40; in key=value form, quote it"
                          " with single quotes and escape ' and \\ with a backslash)") from None
    params.setdefault("sslmode", sslmode)
    params.setdefault("application_name", "memoryd")
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def describe(dsn: str) -> str:
    """``user@host:port/dbname`` (only the parts present): how logs, status and errors name the database."""
    try:
        p = conninfo_to_dict(redact(dsn))
    except Exception:
        return "postgresql (unparsable DSN)"
    host = str(p.get("host") or "localhost")
    where = f"{host}:{p['port']}" if p.get("port") else host
    user = f"{p['user']}@" if p.get("user") else ""
    return f"postgresql://{user}{where}/{p.get('dbname') or ''}"


def describe_error(exc: BaseException, dsn: str) -> str:
    """An exception's first line with every secret of ``dsn`` removed (libpq may quote parts of the DSN)."""
    return scrub(_first_line(exc), dsn)


def scrub(text: str, dsn: str) -> str:
    """``text`` with every secret of ``dsn`` (whole, decoded, and each of its words) replaced by ``***``."""
    for secret in sorted(_secrets(dsn), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return re.sub(r"(password\s*=\s*)\S+", r"\1" + MASK, text, flags=re.IGNORECASE)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _secrets(dsn: str) -> set[str]:
    """Every text a message must not show: the parsed secrets, the raw ones, their decoded forms and
    their pieces (libpq quotes the part of a malformed value after a space or a quote)."""
    _, raw = _redact(dsn)
    out: set[str] = set()
    try:
        params = conninfo_to_dict(dsn)
        out.update(str(params[k]) for k in _SECRET_KEYS if params.get(k))
    except Exception:
        pass
    for secret in raw:
        for form in (secret, unquote(secret), secret.strip("'\"")):
            out.add(form)
            out.update(piece for piece in re.split(r"[\s'\"\\]+", form) if len(piece) >= 3)
            out.update(piece for piece in re.split(r"[^0-9A-Za-z]+", form) if len(piece) >= 4)
    return {s for s in out if s}
