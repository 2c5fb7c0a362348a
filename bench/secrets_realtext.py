"""False alarms on real text: every span the detector finds that an older detector did not, for reading.

    git show 7c97e41:indexer/redaction/privacy.py > /tmp/main_privacy.py
    python bench/secrets_realtext.py --baseline /tmp/main_privacy.py --ext md,rst,txt /usr /opt /root
    python bench/secrets_realtext.py --baseline /tmp/main_privacy.py --ext py /usr/lib/python3

Each distinct line (up to 3,000 characters) of every file with one of the extensions under the
folders is scanned (``privacy.scan``, secrets only) by both detectors; a span the new detector
finds and the baseline does not is printed with its context, then one JSON line of counts.
Nothing is judged automatically: the point is to read what a change to the rules adds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryd.indexer.redaction import privacy  # noqa: E402


def load_baseline(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_privacy", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["baseline_privacy"] = mod
    spec.loader.exec_module(mod)
    return mod


def files(folders: list[Path], exts: tuple[str, ...]) -> Iterator[Path]:
    for folder in folders:
        for dirpath, dirnames, names in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d not in (".git", "proc", "sys")]
            for name in names:
                if name.endswith(exts):
                    yield Path(dirpath) / name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--baseline", type=Path, required=True, help="an older privacy.py")
    ap.add_argument("--ext", default="md,rst,txt", help="comma-separated file extensions")
    args = ap.parse_args()
    old = load_baseline(args.baseline)
    exts = tuple(f".{e.strip('.')}" for e in args.ext.split(","))
    seen: set[str] = set()
    new = scanned = 0
    for f in files(args.folders, exts):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            if len(line) > 3000 or line in seen:
                continue
            seen.add(line)
            scanned += 1
            found = privacy.scan(line, (privacy.SECRET,))
            if not found:
                continue
            before = {(x.start, x.end) for x in old.scan(line, (old.SECRET,))}
            for hit in found:
                if (hit.start, hit.end) not in before:
                    new += 1
                    print(f"{f}: {hit.rule}: {line[max(0, hit.start - 70):hit.end + 15]!r}")
    print(json.dumps({"distinct_lines": scanned, "new_findings": new}))


if __name__ == "__main__":
    main()
