"""DSN handling: the connection string with ``sslmode`` applied, and its password-free description.

The password (in a URI, a ``password=`` key, or ``PGPASSWORD``/``.pgpass`` which
never pass through here) must never reach a log line, ``status`` or an error
message; :func:`describe` is the only form of the DSN that memoryd ever shows.
"""

from __future__ import annotations

import re

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memoryd.indexer.errors import ConfigError

_SECRET_KEYS = ("password", "sslpassword", "passfile", "sslkey")


def conninfo(dsn: str, sslmode: str) -> str:
    """The libpq connection string for ``dsn`` with ``sslmode`` (a DSN's own sslmode wins).

    Raises :class:`ConfigError` naming the problem, never the DSN (it may hold a password).
    """
    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:  # psycopg.ProgrammingError; its text may quote the DSN
        raise ConfigError(f"storage.dsn is not a valid PostgreSQL DSN ({describe_error(exc, dsn)})") from None
    params.setdefault("sslmode", sslmode)
    params.setdefault("application_name", "memoryd")
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def describe(dsn: str) -> str:
    """``user@host:port/dbname`` (only the parts present): how logs, status and errors name the database."""
    try:
        p = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql (unparsable DSN)"
    host = str(p.get("host") or "localhost")
    where = f"{host}:{p['port']}" if p.get("port") else host
    user = f"{p['user']}@" if p.get("user") else ""
    return f"postgresql://{user}{where}/{p.get('dbname') or ''}"


def describe_error(exc: BaseException, dsn: str) -> str:
    """An exception's text with every secret of ``dsn`` removed (libpq quotes parts of the DSN)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for secret in _secrets(dsn):
        text = text.replace(secret, "***")
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", text, flags=re.IGNORECASE)


def _secrets(dsn: str) -> list[str]:
    try:
        p = conninfo_to_dict(dsn)
    except Exception:
        return [dsn] if dsn else []
    return [str(p[k]) for k in _SECRET_KEYS if p.get(k)]
