"""The ``memoryd`` command line that reaches this process's memoryd from another terminal.

The daemon's ready line suggests commands to try; a bare ``memoryd search`` is wrong advice
when memoryd was installed into a virtual environment that is not on ``PATH`` (``make run``
installs ``.venv/bin/memoryd``). Only the process knows how it was started, so the hint is
derived from ``sys.argv[0]`` and checked against ``PATH``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable


def memoryd_command(argv0: str | None = None, which: Callable[[str], str | None] = shutil.which,
                    executable: str | None = None) -> str:
    """``memoryd`` when that name on ``PATH`` is this script; else the script's absolute path, or
    ``python -m memoryd`` as it was run. Anything else (an embedding host, tests) gets ``memoryd``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0)
    if name == "memoryd":
        path = os.path.abspath(argv0)
        found = which("memoryd")
        if found is not None and os.path.realpath(found) == os.path.realpath(path):
            return "memoryd"
        return shlex.quote(path)
    if name == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "memoryd":
        return f"{shlex.quote(executable or sys.executable)} -m memoryd"
    return "memoryd"
