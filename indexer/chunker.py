"""Markdown → overlapping windows of at most ``max_tokens`` model tokens.

Why content-defined: a window's vector is cached by its text, so a one-line edit
must change only the windows around it. Packing greedily from the top would
shift every later window; instead the cuts are chosen by the content near them:

1. the file is read into *blocks* (a line; a whole fenced code block that fits;
   a piece of a line too long for one window), each with the strength of the
   boundary before it (heading > blank line / list item / fence > sentence end >
   line break);
2. hard cuts: a heading once the window holds more than headings, and both
   edges of every piece of a split line;
3. anchors: a boundary is a cut when its key (strength, then a blake2b hash of
   the block before it) beats every other boundary within ``RADIUS`` of the
   budget on both sides (hard cuts and the file's ends beat all). That depends
   only on the text within the radius, so an edit moves cuts only near itself;
   anchors are at least a radius apart, which sets the typical window size
   (about 80 % of ``max_tokens`` with overlap);
4. a stretch between two cuts that exceeds the budget is split into cores of
   about equal size at the strongest, then best-hashed, boundaries; its ends are
   stable cuts, so this stays local too;
5. each window after the first is prefixed with whole trailing blocks of the
   previous window's core (≤ ``overlap_tokens``, never above the current
   section's heading), so overlap derives from stable content as well.

A core's budget is ``max_tokens`` minus ``OVERLAP_RESERVE`` of the overlap; a core
larger than ``max_tokens - overlap_tokens`` gets a shorter overlap, so that core
+ overlap always fits ``max_tokens``. Per-line token counts are only estimates of a
joined window, so every multi-line window (and its overlap) is re-counted in one
batch and shrunk if over: overlap lines first, then the core is halved.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from hashlib import blake2b

from memoryd.indexer.errors import ConfigError
from memoryd.indexer.markdown_blocks import HEADING, LINE, Outline, parse_outline, split_long_texts
from memoryd.indexer.types import Chunk, Document, TokenCounter

#: Part of the index identity: bump it when windows change, so every file is re-chunked once.
CHUNKER_VERSION = "2"
RADIUS = 0.75  # of the core budget: a cut is the best boundary within this many tokens either side
OVERLAP_RESERVE = 0.25  # of overlap_tokens kept out of the core budget; bigger cores get less overlap
_HASH_SPAN = float(2**64)


@dataclass(slots=True)
class _Block:
    """Lines ``first..last`` (0-based, inclusive) packed as one unit; ``piece`` is set
    for a piece of a split long line, which always gets a window of its own."""

    first: int
    last: int
    tokens: int
    strength: int
    piece: str | None = None


@dataclass(slots=True)
class _Window:
    """Lines ``start..end`` (0-based, inclusive); lines before ``core`` are overlap."""

    start: int
    core: int
    end: int
    piece: str | None = None


def chunk_markdown(
    text: str, count_tokens: TokenCounter, max_tokens: int = 400, overlap_tokens: int = 80
) -> Document:
    """Chunk one Markdown file; see the module docstring for how windows are cut.

    ``count_tokens`` counts model tokens without special tokens; it is called
    once for all lines, a few times more only for lines over ``max_tokens``, and
    once to verify the joined windows. Every chunk's text counts at most
    ``max_tokens`` by it. Raises ConfigError for limits out of range
    (``max_tokens`` >= 8, ``overlap_tokens`` in 0..max_tokens/2).
    """
    if max_tokens < 8:
        raise ConfigError(f"chunking.max_tokens: {max_tokens} must be >= 8")
    if not 0 <= overlap_tokens <= max_tokens // 2:
        raise ConfigError(f"chunking.overlap_tokens: {overlap_tokens} must be in 0..{max_tokens // 2}")
    outline = parse_outline(text)
    warnings = list(outline.warnings)
    line_tokens = _count_lines(outline, count_tokens)
    blocks = _build_blocks(outline, line_tokens, count_tokens, max_tokens, warnings)
    budget = max_tokens - round(OVERLAP_RESERVE * overlap_tokens)
    cores = _Packer(blocks, outline.lines, budget).cores()
    windows = _with_overlap(cores, blocks, outline, max_tokens, overlap_tokens)
    windows = _fit(windows, outline, count_tokens, max_tokens, overlap_tokens)
    chunks = [
        Chunk(w.start + 1, w.end + 1, outline.heading_at(w.start), _window_text(w, outline.lines))
        for w in windows
    ]
    return Document(chunks, outline.front_matter, warnings)


def _count_lines(outline: Outline, count_tokens: TokenCounter) -> list[int]:
    """Tokens of every body line in one call (0 for blank lines and front matter)."""
    lines = outline.lines
    body = [i for i in range(outline.body_start, len(lines)) if lines[i] and not lines[i].isspace()]
    tokens = [0] * len(lines)
    for i, n in zip(body, count_tokens([lines[i] for i in body]) if body else [], strict=True):
        tokens[i] = n
    return tokens


def _build_blocks(
    outline: Outline, line_tokens: list[int], count_tokens: TokenCounter, max_tokens: int, warnings: list[str]
) -> list[_Block]:
    """The packing units in file order. A fence that fits stays one block; a larger
    one falls apart into its lines; a line over ``max_tokens`` into pieces."""
    blocks: list[_Block] = []
    strengths = outline.strengths
    i = outline.body_start
    while i < len(line_tokens):
        end = outline.fence_ends.get(i, i)
        fence_tokens = sum(line_tokens[i : end + 1])
        if end == i:
            if line_tokens[i]:
                blocks.append(_Block(i, i, line_tokens[i], strengths[i]))
        elif fence_tokens <= max_tokens:
            blocks.append(_Block(i, end, fence_tokens, strengths[i]))
        else:
            # Inside a fence too big for one window every line is a (weak) boundary.
            inside = [j for j in range(i, end + 1) if line_tokens[j]]
            blocks.extend(_Block(j, j, line_tokens[j], strengths[j] or LINE) for j in inside)
        i = end + 1
    if any(b.tokens > max_tokens for b in blocks):
        return _split_blocks(blocks, outline, count_tokens, max_tokens, warnings)
    return blocks


def _split_blocks(
    blocks: list[_Block], outline: Outline, count_tokens: TokenCounter, max_tokens: int, warnings: list[str]
) -> list[_Block]:
    """Replace every block over ``max_tokens`` (always a single line) by its pieces."""
    long = [b for b in blocks if b.tokens > max_tokens]
    pieces = split_long_texts([outline.lines[b.first] for b in long], count_tokens, max_tokens)
    by_line = dict(zip((b.first for b in long), pieces, strict=True))
    out: list[_Block] = []
    for b in blocks:
        if b.tokens <= max_tokens:
            out.append(b)
            continue
        parts = by_line[b.first]
        warnings.append(f"line {b.first + 1}: {b.tokens} tokens > {max_tokens}; split in {len(parts)} pieces")
        for k, (piece, tokens) in enumerate(parts):
            out.append(_Block(b.first, b.first, tokens, b.strength if k == 0 else LINE, piece))
    return out


class _Packer:
    """Cuts the block sequence into window cores; see steps 2-4 of the module docstring."""

    def __init__(self, blocks: list[_Block], lines: list[str], budget: int) -> None:
        self.blocks, self.lines, self.budget = blocks, lines, budget
        self.radius = RADIUS * budget
        self.offsets = [0]
        for b in blocks:
            self.offsets.append(self.offsets[-1] + b.tokens)
        self._hashes: dict[int, float] = {}

    def hash(self, j: int) -> float:
        """blake2b of the block before boundary ``j``, in [0, 1) (cached: subdivide revisits)."""
        if (cached := self._hashes.get(j)) is not None:
            return cached
        b = self.blocks[j - 1]
        text = self.lines[b.first] if b.first == b.last else "\n".join(self.lines[b.first : b.last + 1])
        digest = blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        self._hashes[j] = value = int.from_bytes(digest, "big") / _HASH_SPAN
        return value

    def hard_cuts(self) -> set[int]:
        """Boundaries that are always cuts: a heading after text, the edges of a piece."""
        cuts: set[int] = set()
        has_text = False
        for j, b in enumerate(self.blocks):
            if j > 0 and (b.piece is not None or self.blocks[j - 1].piece is not None
                          or (b.strength == HEADING and has_text)):
                cuts.add(j)
                has_text = False
            has_text = has_text or b.strength != HEADING
        return cuts

    def anchors(self, hard: set[int]) -> list[int]:
        """Boundaries whose (strength, hash) key beats every other boundary within
        ``radius`` tokens on both sides (hard cuts and the file's ends beat all).
        Purely local, so an edit moves only the anchors within ``radius`` of it; a
        weak boundary (a line break) wins only where no stronger one is near."""
        n, offs, blocks = len(self.blocks), self.offsets, self.blocks
        keys = [-math.inf] * (n + 1)  # keys[j]: boundary before block j; the ends beat all
        for j in range(1, n):
            if j not in hard:
                keys[j] = self.hash(j) - blocks[j].strength
        found: list[int] = []
        for j in range(1, n):
            key, lo, hi = keys[j], offs[j] - self.radius, offs[j] + self.radius
            if key == -math.inf:
                continue
            d = j - 1  # keys[0] and keys[n] are -inf, so both scans stop
            while offs[d] >= lo and keys[d] > key:
                d -= 1
            if offs[d] >= lo:
                continue
            d = j + 1
            while offs[d] <= hi and keys[d] > key:
                d += 1
            if offs[d] > hi:
                found.append(j)
        return found

    def subdivide(self, a: int, b: int) -> list[range]:
        """Split blocks ``a..b`` (between two cuts) into cores within ``budget``,
        about equal in size, cutting at the strongest then best-hashed boundary."""
        out: list[range] = []
        off = self.offsets
        while off[b] - off[a] > self.budget and b - a > 1:
            rest = off[b] - off[a]
            pieces = -(-rest // self.budget)
            # Keep every core near rest/pieces: none below 60 % of it on either side of the cut.
            floor = 0.6 * rest / pieces
            lo, hi = max(rest - (pieces - 1) * self.budget, floor), rest - floor * (pieces - 1)
            best, key, last_fit = None, (0, 0.0), a + 1
            for j in range(a + 1, b):
                size = off[j] - off[a]
                if size > self.budget:
                    break
                last_fit = j
                if lo <= size <= hi:
                    cand = (self.blocks[j].strength, -self.hash(j))
                    if best is None or cand > key:
                        best, key = j, cand
            best = last_fit if best is None else best
            out.append(range(a, best))
            a = best
        out.append(range(a, b))
        return out

    def cores(self) -> list[range]:
        """Partition the blocks into window cores (ranges of block indices)."""
        if not self.blocks:
            return []
        hard = self.hard_cuts()
        cuts = [0, *sorted(hard.union(self.anchors(hard))), len(self.blocks)]
        return [core for a, b in itertools.pairwise(cuts) for core in self.subdivide(a, b)]


def _overlap_start(prev: range, core: range, blocks: list[_Block], outline: Outline, room: int) -> int:
    """First line of the overlap for ``core``: whole trailing blocks of ``prev`` worth
    at most ``room`` tokens, none above the heading in force at the core."""
    first = blocks[core.start]
    start = first.first
    if room <= 0 or first.strength == HEADING or first.piece is not None or blocks[prev[-1]].piece:
        return start
    floor = outline.section_start(first.first)
    used = 0
    for k in reversed(prev):
        b = blocks[k]
        used += b.tokens
        if used > room or b.first < floor:
            break
        start = b.first
    return start


def _with_overlap(
    cores: list[range], blocks: list[_Block], outline: Outline, max_tokens: int, overlap_tokens: int
) -> list[_Window]:
    windows: list[_Window] = []
    for n, core in enumerate(cores):
        first, last = blocks[core.start], blocks[core[-1]]
        start = first.first
        if n > 0:
            room = min(overlap_tokens, max_tokens - sum(blocks[k].tokens for k in core))
            start = _overlap_start(cores[n - 1], core, blocks, outline, room)
        windows.append(_Window(start, first.first, last.last, first.piece))
    return windows


def _window_text(w: _Window, lines: list[str]) -> str:
    if w.piece is not None:
        return w.piece
    return lines[w.start] if w.start == w.end else "\n".join(lines[w.start : w.end + 1])


def _next_text_line(lines: list[str], i: int, stop: int) -> int:
    """The first non-blank line after ``i`` (``stop`` at most)."""
    i += 1
    while i < stop and not lines[i].strip():
        i += 1
    return i


def _shrink(w: _Window, lines: list[str]) -> list[_Window]:
    """A window over a limit, made smaller: drop an overlap line, else halve the core
    (only the core can be over then, and it spans at least two text lines)."""
    if w.start < w.core:
        return [_Window(_next_text_line(lines, w.start, w.core), w.core, w.end)]
    text_lines = [i for i in range(w.core, w.end + 1) if lines[i].strip()]
    mid = text_lines[len(text_lines) // 2]
    head_end = text_lines[len(text_lines) // 2 - 1]
    return [_Window(w.core, w.core, head_end), _Window(mid, mid, w.end)]


def _fit(
    windows: list[_Window], outline: Outline, count_tokens: TokenCounter, max_tokens: int, overlap_tokens: int
) -> list[_Window]:
    """Re-count joined windows (and their overlaps) and shrink any over its limit.

    A single line or piece was counted exactly already; only multi-line windows
    are re-counted, all in one batch per round (rounds after the first are rare).
    """
    lines = outline.lines
    todo = [w for w in windows if w.piece is None and w.start != w.end]
    while todo:
        texts: list[str] = []
        for w in todo:
            overlap = _Window(w.start, w.start, w.core - 1)
            texts.append(_window_text(w, lines))
            texts.append(_window_text(overlap, lines) if w.start < w.core else "")
        counts = count_tokens(texts)
        replaced: dict[int, list[_Window]] = {}
        for k, w in enumerate(todo):
            if counts[2 * k] > max_tokens or counts[2 * k + 1] > overlap_tokens:
                replaced[id(w)] = _shrink(w, lines)
        if not replaced:
            break
        windows = [v for w in windows for v in replaced.get(id(w), [w])]
        todo = [v for parts in replaced.values() for v in parts if v.start != v.end]
    return windows
