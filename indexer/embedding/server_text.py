"""Text a remote embedding server sends back, made safe to put in an error message.

A server's 401 answer repeated the API key ("invalid key sk-…"); the message went into the
embedder's ``last_error``, from there into ``status``, a search's ``degraded`` (a confined peer's
too) and four kinds of log lines. The log redaction (daemon/log_redaction.py) did not catch it: it
runs the secret detector, and a key in no format the detector knows (``local-embed-key-…``) is
just text to it. So the server's text is scrubbed where it enters memoryd, before any message is
built from it: the configured key (whatever it looks like) and anything the secret detector
flags become ``[REDACTED:…]``, control characters go, and it is cut short.
"""

from __future__ import annotations

import re

MAX_CHARS = 200
KEY_MARK = "[REDACTED:embedding.api_key]"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def scrub(text: str, key: str) -> str:
    """``text`` without ``key``, detected secrets or control characters, at most :data:`MAX_CHARS` long
    (the key goes first: the detector could split it, the cut could leave a piece of it)."""
    from memoryd.indexer.redaction.privacy import redact  # the detector loads on the first server error only

    out = text.replace(key, KEY_MARK) if key else text
    return _CONTROL.sub(" ", redact(out, "secrets"))[:MAX_CHARS]
