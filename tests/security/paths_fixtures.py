"""A memory tree with two peers, a look-alike peer folder, owner files and a folder outside every root.

Shared by the ``test_paths_*`` regression tests: each file holds one unique word, so that a search or a
read that reaches it is easy to detect (``WORDS``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import running_daemon

#: root-relative file → its unique word ("outside" files live next to the root, not in it)
WORDS = {
    "MEMORY.md": "ownerzebra",
    "user/preferences.md": "ownerpref",
    "peers/alice/MEMORY.md": "alicequokka",
    "peers/bob/MEMORY.md": "bobwombat",
    "peers/Bob/MEMORY.md": "bobcapsotter",
    "groups/team/MEMORY.md": "teamheron",
}
OUTSIDE_WORD = "outsidesecret"
ALICE = {"kind": "direct", "peer": "alice"}
BOB = {"kind": "direct", "peer": "bob"}
BOB_CAPS = {"kind": "direct", "peer": "BOB"}
TEAM = {"kind": "group", "group": "team"}


def files() -> dict[str, str]:
    return {rel: f"# Notes\n\n- The word of this file is {word}.\n" for rel, word in WORDS.items()}


@contextmanager
def tree(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Any, Path, Path]]:
    """``(daemon, client, root, outside)``: the daemon indexes ``root``; ``outside`` holds a secret file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n- The word of this file is {OUTSIDE_WORD}.\n")
    with running_daemon(tmp_path, short_dir / "m.sock", files()) as (d, client, root):
        yield d, client, root, outside


def words_in(result: dict[str, Any]) -> set[str]:
    """The unique words anywhere in a search/context/get result."""
    text = json.dumps(result)
    return {w for w in [*WORDS.values(), OUTSIDE_WORD] if w in text}
