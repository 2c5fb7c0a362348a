"""The privacy filter on the labelled secrets corpus: confusion matrices and a final JSON line.

    python bench/secrets_eval.py                      # memoryd's detector
    python bench/secrets_eval.py --show-errors        # and every miss / false alarm
    python bench/secrets_eval.py --throughput DIR     # and its speed on the Markdown files under DIR
    git show REV:indexer/redaction/privacy.py > /tmp/old_privacy.py
    python bench/secrets_eval.py --throughput DIR --baseline /tmp/old_privacy.py   # and an older detector's
    python bench/secrets_eval.py --compare detect-secrets           # needs detect-secrets installed
    python bench/secrets_eval.py --compare detect-secrets-adhoc     # its scan_line (--string) mode
    python bench/secrets_eval.py --compare gitleaks=PATH/gitleaks.toml

Reads ``tests/security/data/secrets_corpus.jsonl`` (made by
``tests/security/make_secrets_corpus.py``). A positive counts as caught when
``privacy.check`` refuses it; a negative is a false positive when it is refused.
The comparisons run the same corpus through another rule set: detect-secrets'
default plugins (``scan_line``), or gitleaks' published rules (keywords, regex
and entropy; its allowlists are not applied, which can only add hits).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryd.indexer.redaction import privacy  # noqa: E402

CORPUS = ROOT / "tests" / "security" / "data" / "secrets_corpus.jsonl"


def load(path: Path = CORPUS) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def memoryd_detector(text: str) -> bool:
    return not privacy.check(text).passed


def detect_secrets_detector() -> Callable[[str], bool]:
    """detect-secrets as ``detect-secrets scan`` runs it: default plugins and filters, on a file.

    (Its ``scan_line`` is the "adhoc" mode with eager search, which flags nearly every line of prose.)
    """
    import tempfile

    from detect_secrets import SecretsCollection  # type: ignore[import-not-found]
    from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

    folder = Path(tempfile.mkdtemp(prefix="secrets-eval-"))

    def detect(text: str) -> bool:
        note = folder / "note.txt"
        note.write_text(text, encoding="utf-8")
        found = SecretsCollection()
        with default_settings():
            found.scan_file(str(note))
        return bool(found.data)
    return detect


def detect_secrets_adhoc_detector() -> Callable[[str], bool]:
    """detect-secrets' ``scan_line`` (``detect-secrets scan --string``): eager search, line by line."""
    from detect_secrets.core.scan import scan_line  # type: ignore[import-not-found]
    from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

    def detect(text: str) -> bool:
        with default_settings():
            return any(True for line in text.splitlines() for _ in scan_line(line))
    return detect


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(n / len(s) * math.log2(n / len(s)) for n in counts.values()) if s else 0.0


def gitleaks_detector(toml_path: str) -> tuple[Callable[[str], bool], int, int]:
    """gitleaks' rules in Python ``re``: inline ``(?i)`` moved to the front; rules that do not compile are skipped."""
    import tomllib

    rules = []
    skipped = 0
    for rule in tomllib.loads(Path(toml_path).read_text())["rules"]:
        rx = rule.get("regex")
        if not rx:
            skipped += 1
            continue
        flags = re.IGNORECASE if "(?i)" in rx else 0
        try:
            pattern = re.compile(rx.replace("(?i)", ""), flags)
        except re.error:
            skipped += 1
            continue
        rules.append((pattern, [k.lower() for k in rule.get("keywords", [])], rule.get("entropy"),
                      rule.get("secretGroup", 0)))

    def detect(text: str) -> bool:
        low = text.lower()
        for pattern, keywords, entropy, group in rules:
            if keywords and not any(k in low for k in keywords):
                continue
            for m in pattern.finditer(text):
                secret = m.group(group or (1 if m.re.groups else 0)) or m.group()
                if entropy is None or _entropy(secret) >= entropy:
                    return True
        return False
    return detect, len(rules), skipped


def confusion(rows: list[dict[str, object]], detect: Callable[[str], bool]) -> dict[str, object]:
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    by_lang: dict[str, Counter[str]] = defaultdict(Counter)
    errors = []
    for row in rows:
        hit = detect(str(row["text"]))
        cell = ("tp" if hit else "fn") if row["label"] == 1 else ("fp" if hit else "tn")
        by_kind[f"{'+' if row['label'] == 1 else '-'} {row['kind']}"][cell] += 1
        by_lang[str(row["lang"])][cell] += 1
        if cell in ("fn", "fp"):
            errors.append((cell, row["kind"], row["text"]))
    total: Counter[str] = sum(by_lang.values(), Counter())
    return {"by_kind": by_kind, "by_lang": by_lang, "total": total, "errors": errors,
            "recall": total["tp"] / max(1, total["tp"] + total["fn"]),
            "fp_rate": total["fp"] / max(1, total["fp"] + total["tn"])}


def table(title: str, cells: dict[str, Counter[str]]) -> str:
    lines = [f"| {title} | TP | FN | FP | TN |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {c['tp']} | {c['fn']} | {c['fp']} | {c['tn']} |" for k, c in sorted(cells.items())]
    return "\n".join(lines)


def _best_rate(texts: list[str], redact: Callable[[str, str], str], rounds: int = 7) -> float:
    best = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        for t in texts:
            redact(t, "secrets")
        best = min(best, time.perf_counter() - t0)
    return sum(map(len, texts)) / best


def throughput(folder: Path, baseline: Path | None) -> dict[str, float]:
    """chars/s of ``redact(text, "secrets")`` (the index-time call) on 1,200-character slices of the files.

    With ``baseline`` (an older ``privacy.py``, stdlib-only), the two are timed in
    alternation in this one process, so machine load affects both alike.
    """
    texts = []
    for f in sorted(folder.rglob("*.md")):
        t = f.read_text(encoding="utf-8", errors="replace")
        texts += [t[i:i + 1200] for i in range(0, len(t), 1200)]
    out: dict[str, float] = {"chars": sum(map(len, texts))}
    if baseline is None:
        out["chars_per_s"] = round(_best_rate(texts, privacy.redact))
        return out
    spec = importlib.util.spec_from_file_location("baseline_privacy", baseline)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old  # dataclasses look their module up while the class is built
    spec.loader.exec_module(old)
    now, before = 0.0, 0.0
    for _ in range(3):
        now = max(now, _best_rate(texts, privacy.redact, 3))
        before = max(before, _best_rate(texts, old.redact, 3))
    return out | {"chars_per_s": round(now), "baseline_chars_per_s": round(before), "slowdown": round(before / now, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--show-errors", action="store_true")
    ap.add_argument("--throughput", type=Path, metavar="DIR")
    ap.add_argument("--baseline", type=Path, metavar="PRIVACY_PY", help="an older privacy.py to time as well")
    ap.add_argument("--compare", metavar="NAME[=PATH]",
                    help="detect-secrets, detect-secrets-adhoc, or gitleaks=PATH/gitleaks.toml")
    args = ap.parse_args(argv)
    rows = load(args.corpus)
    detector, name, extra = memoryd_detector, "memoryd", {}
    if args.compare == "detect-secrets":
        detector, name = detect_secrets_detector(), "detect-secrets"
    elif args.compare == "detect-secrets-adhoc":
        detector, name = detect_secrets_adhoc_detector(), "detect-secrets-adhoc"
    elif args.compare and args.compare.startswith("gitleaks="):
        detector, used, skipped = gitleaks_detector(args.compare.split("=", 1)[1])
        name, extra = "gitleaks", {"rules_used": used, "rules_skipped": skipped}
    res = confusion(rows, detector)
    print(f"## {name}: {len(rows)} notes\n")
    print(table("kind (+ secret / - clean)", res["by_kind"]) + "\n")  # type: ignore[arg-type]
    print(table("language", res["by_lang"]) + "\n")  # type: ignore[arg-type]
    if args.show_errors:
        for cell, kind, text in res["errors"]:  # type: ignore[attr-defined]
            print(f"{cell} [{kind}] {text!r}")
    out = {"detector": name, "notes": len(rows), **dict(res["total"]),  # type: ignore[arg-type]
           "recall": round(res["recall"], 4), "fp_rate": round(res["fp_rate"], 4), **extra}  # type: ignore[arg-type]
    if args.throughput:
        out |= throughput(args.throughput, args.baseline)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
