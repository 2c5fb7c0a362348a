"""Markdown → overlapping windows of at most ``max_tokens`` model tokens.

Why content-defined: a window's vector is cached by its text, so a one-line edit
must change only the windows around it. Packing greedily from the top would
shift every later window; instead the cuts are chosen by the content near them:

1. the file is read into *blocks*, each with the strength of the boundary before
   it (heading > blank line / list item / fence > sentence end > line break >
   inside a sentence). A block is a line; a whole fenced code block that fits
   one window; or, for a line longer than half the core budget (a paragraph
   written as one line), one sentence of it (``. ! ?`` + space, ``。！？``), and
   for such a sentence longer than the overlap, runs of its words (characters
   where it has no spaces) of at most that many tokens. So no text block is
   longer than half a core, and windows fill across paragraphs as they do
   across list items, while a line that fits stays whole in its window (a
   dialogue turn is never cut for packing);
2. hard cuts: a heading once the window holds more than headings;
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
   section's heading), then, when the next line back is a paragraph line too
   long to come whole, with its trailing sentences that fit the room left (a
   list item or table row is a unit: whole or not at all): overlap is
   sentence-level in prose, and derives from stable content as well.

A window is therefore a contiguous slice of the file that may begin and end
inside a line (at a sentence); its span names every line it touches. A core's
budget is ``max_tokens`` minus ``OVERLAP_RESERVE`` of the overlap; a core larger
than ``max_tokens - overlap_tokens`` gets a shorter overlap, so that core +
overlap always fits ``max_tokens``. Block counts are only estimates of a joined
window, so every multi-block window (and its overlap) is re-counted in one batch
and shrunk if over: the sentence head and overlap blocks first, then the core is
halved.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from hashlib import blake2b

from memoryd.indexer.errors import ConfigError
from memoryd.indexer.markdown.outline import HEADING, LINE, SENTENCE, Outline, parse_outline, split_long_texts
from memoryd.indexer.types import Chunk, Document, TokenCounter

#: Part of the index identity: bump it when windows change, so every file is re-chunked once.
#: 3: lines longer than half a core are packed by sentences (windows fill across paragraphs), the
#: overlap ends with trailing sentences of a line too long to come whole, fences are counted joined.
CHUNKER_VERSION = "3"
RADIUS = 0.75  # of the core budget: a cut is the best boundary within this many tokens either side
OVERLAP_RESERVE = 0.25  # of overlap_tokens kept out of the core budget; bigger cores get less overlap
WORD = 0  # boundary strength inside a sentence (between word runs of an over-long sentence): the weakest
_HASH_SPAN = float(2**64)
# A sentence end inside a line: Latin . ! ? (closing quotes/brackets allowed) and a space, or CJK 。！？.
_SENTENCE_BREAK = re.compile(r"[.!?][\"'”’)\]]*\s+|[。！？]+[」』”’）)]*\s*")
# A list item (a bullet, a dialogue turn ``- **Name**: ...``) or a table row: a unit that an
# overlap repeats whole or not at all. Its later sentences lean on its label (who said it, which
# row); repeated without it they mislead: on LoCoMo, label-less tail sentences of turns at window
# starts cost 7 of 760 first hits, mostly on the vector leg.
_UNIT_LINE = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)|[ \t]*\|")


@dataclass(slots=True)
class _Block:
    """The text from character ``begin`` of line ``first`` to character ``end`` of line
    ``last`` (0-based lines, inclusive; ``end`` None: to the end of the line), packed as
    one unit. Whole lines have ``begin`` 0 and ``end`` None."""

    first: int
    last: int
    tokens: int
    strength: int
    begin: int = 0
    end: int | None = None


@dataclass(slots=True)
class _Window:
    """Blocks ``start..end`` (indices, inclusive); blocks before ``core`` are overlap. ``head``
    (a character offset into the line of block ``start - 1``, a whole line) starts the
    window earlier, at trailing sentences of that line."""

    start: int
    core: int
    end: int
    head: int | None = None


def chunk_markdown(
    text: str, count_tokens: TokenCounter, max_tokens: int = 400, overlap_tokens: int = 80
) -> Document:
    """Chunk one Markdown file; see the module docstring for how windows are cut.

    ``count_tokens`` counts model tokens without special tokens; it is called
    once for all lines, once for the sentences of lines longer than the overlap,
    a few times more only for sentences longer than it and for fenced code, and
    once to verify the joined windows. Every chunk's text counts at most
    ``max_tokens`` by it (a single character worth more is the only exception).
    Raises ConfigError for limits out of range (``max_tokens`` >= 8,
    ``overlap_tokens`` in 0..max_tokens/2).
    """
    if max_tokens < 8:
        raise ConfigError(f"chunking.max_tokens: {max_tokens} must be >= 8")
    if not 0 <= overlap_tokens <= max_tokens // 2:
        raise ConfigError(f"chunking.overlap_tokens: {overlap_tokens} must be in 0..{max_tokens // 2}")
    outline = parse_outline(text)
    warnings = list(outline.warnings)
    line_tokens = _count_lines(outline, count_tokens)
    budget = max_tokens - round(OVERLAP_RESERVE * overlap_tokens)
    # Sentence pieces: at most the overlap (without one, a quarter of a window, so that windows fill).
    piece_limit = overlap_tokens or max(1, max_tokens // 4)
    split_at = max(piece_limit, budget // 2)
    blocks = _build_blocks(outline, line_tokens, count_tokens, max_tokens, split_at, piece_limit, warnings)
    lines = outline.lines
    cores = _Packer(blocks, lines, budget).cores()
    windows = _with_overlap(cores, blocks, outline, max_tokens, overlap_tokens)
    _add_sentence_heads(windows, blocks, outline, count_tokens, max_tokens, overlap_tokens)
    windows = _fit(windows, blocks, lines, count_tokens, max_tokens, overlap_tokens)
    chunks = [
        Chunk(_first_line(w, blocks) + 1, blocks[w.end].last + 1, outline.heading_at(_first_line(w, blocks)),
              _window_text(w, blocks, lines))
        for w in windows
    ]
    return Document(chunks, outline.front_matter, warnings)


def _first_line(w: _Window, blocks: list[_Block]) -> int:
    return blocks[w.start - 1].first if w.head is not None else blocks[w.start].first


def _window_text(w: _Window, blocks: list[_Block], lines: list[str], end: int | None = None) -> str:
    """The window's text (up to block ``end`` instead of its last block when given)."""
    last = blocks[w.end if end is None else end]
    if w.head is None:
        return _slice(lines, blocks[w.start], last)
    line = blocks[w.start - 1].first
    return _slice(lines, _Block(line, line, 0, 0, w.head), last)


def _slice(lines: list[str], a: _Block, b: _Block) -> str:
    """The file's text from the start of block ``a`` to the end of block ``b``."""
    if a.first == b.last:
        return lines[a.first][a.begin : b.end]
    return "\n".join([lines[a.first][a.begin :], *lines[a.first + 1 : b.last], lines[b.last][: b.end]])


def _count_lines(outline: Outline, count_tokens: TokenCounter) -> list[int]:
    """Tokens of every body line in one call (0 for blank lines and front matter)."""
    lines = outline.lines
    body = [i for i in range(outline.body_start, len(lines)) if lines[i] and not lines[i].isspace()]
    tokens = [0] * len(lines)
    for i, n in zip(body, count_tokens([lines[i] for i in body]) if body else [], strict=True):
        tokens[i] = n
    return tokens


def _build_blocks(
    outline: Outline, line_tokens: list[int], count_tokens: TokenCounter, max_tokens: int, split_at: int,
    piece_limit: int, warnings: list[str],
) -> list[_Block]:
    """The packing units in file order. A fence that fits stays one block; a larger
    one falls apart into its lines; a line over ``split_at`` into its sentences."""
    blocks: list[_Block] = []
    strengths = outline.strengths
    i = outline.body_start
    while i < len(line_tokens):
        end = outline.fence_ends.get(i, i)
        if end == i:
            if line_tokens[i]:
                blocks.append(_Block(i, i, line_tokens[i], strengths[i]))
        elif sum(line_tokens[i : end + 1]) <= max_tokens:
            blocks.append(_Block(i, end, sum(line_tokens[i : end + 1]), strengths[i]))
        else:
            blocks.extend(_fence_lines(outline, line_tokens, i, end))
        i = end + 1
    blocks = _count_fences(blocks, outline, line_tokens, count_tokens, max_tokens)
    if any(b.tokens > split_at and b.first == b.last for b in blocks):
        return _split_lines(blocks, outline.lines, count_tokens, max_tokens, split_at, piece_limit, warnings)
    return blocks


def _fence_lines(outline: Outline, line_tokens: list[int], first: int, last: int) -> list[_Block]:
    """A fence too big for one window, as its lines: inside it every line is a (weak) boundary."""
    strengths = outline.strengths
    return [_Block(j, j, line_tokens[j], strengths[j] or LINE) for j in range(first, last + 1) if line_tokens[j]]


def _count_fences(
    blocks: list[_Block], outline: Outline, line_tokens: list[int], count_tokens: TokenCounter, max_tokens: int
) -> list[_Block]:
    """Count every whole fence as joined text (one call), so that every single-block window is
    counted exactly; a fence that then counts over ``max_tokens`` falls apart into its lines."""
    fences = [b for b in blocks if b.first != b.last]
    if not fences:
        return blocks
    lines = outline.lines
    for b, n in zip(fences, count_tokens([_slice(lines, b, b) for b in fences]), strict=True):
        b.tokens = n
    out: list[_Block] = []
    for b in blocks:
        out.extend(_fence_lines(outline, line_tokens, b.first, b.last) if b.tokens > max_tokens else [b])
    return out


def _split_lines(
    blocks: list[_Block], lines: list[str], count_tokens: TokenCounter, max_tokens: int, split_at: int,
    limit: int, warnings: list[str],
) -> list[_Block]:
    """Replace every one-line block over ``split_at`` tokens by its sentences (and the word
    runs of sentences over ``limit``); the first keeps the line's boundary strength."""
    long = [b for b in blocks if b.first == b.last and b.tokens > split_at]
    parts = _pieces([lines[b.first] for b in long], count_tokens, limit)
    by_line = {b.first: p for b, p in zip(long, parts, strict=True)}
    out: list[_Block] = []
    for b in blocks:
        pieces = by_line.get(b.first) if b.first == b.last else None
        if pieces is None or len(pieces) < 2:
            out.append(b)
            continue
        if b.tokens > max_tokens:
            warnings.append(f"line {b.first + 1}: {b.tokens} tokens > {max_tokens}; split in {len(pieces)} pieces")
        last = len(pieces) - 1
        for k, (begin, end, tokens, strength) in enumerate(pieces):
            out.append(_Block(b.first, b.first, tokens, b.strength if k == 0 else strength,
                              0 if k == 0 else begin, None if k == last else end))
    return out


def _pieces(texts: list[str], count_tokens: TokenCounter, limit: int) -> list[list[tuple[int, int, int, int]]]:
    """``(begin, end, tokens, strength before it)`` of the pieces of each text: its sentences, each
    sentence over ``limit`` tokens cut into runs of words (characters) of at most ``limit``.
    Offsets are those of the stripped piece; all texts are counted together."""
    spans = [_sentence_spans(t) for t in texts]
    flat = [(t, b, e) for t, row in zip(texts, spans, strict=True) for b, e in row]
    counts = count_tokens([t[b:e] for t, b, e in flat]) if flat else []
    over = [(t, b, e) for (t, b, e), n in zip(flat, counts, strict=True) if n > limit]
    split = iter(split_long_texts([t[b:e] for t, b, e in over], count_tokens, limit) if over else [])
    known = iter(counts)
    out: list[list[tuple[int, int, int, int]]] = []
    for text, row in zip(texts, spans, strict=True):
        pieces: list[tuple[int, int, int, int]] = []
        for b, e in row:
            n = next(known)
            if n <= limit:
                pieces.append((b, e, n, SENTENCE))
                continue
            pos = b
            for k, (piece, tokens) in enumerate(next(split)):
                start = text.index(piece, pos)
                pos = start + len(piece)
                pieces.append((start, pos, tokens, SENTENCE if k == 0 else WORD))
        out.append(pieces)
    return out


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(begin, end)`` of each sentence of ``text``, stripped of surrounding white space."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for stop in [m.end() for m in _SENTENCE_BREAK.finditer(text)] + [len(text)]:
        segment = text[pos:stop]
        if segment.strip():
            begin = pos + len(segment) - len(segment.lstrip())
            spans.append((begin, pos + len(segment.rstrip())))
        pos = max(pos, stop)
    return spans


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
        digest = blake2b(_slice(self.lines, b, b).encode("utf-8", "surrogatepass"), digest_size=8).digest()
        self._hashes[j] = value = int.from_bytes(digest, "big") / _HASH_SPAN
        return value

    def hard_cuts(self) -> set[int]:
        """Boundaries that are always cuts: a heading after text."""
        cuts: set[int] = set()
        has_text = False
        for j, b in enumerate(self.blocks):
            if j > 0 and b.strength == HEADING and has_text:
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
    """First block of the window of ``core``: whole trailing blocks of ``prev`` worth at
    most ``room`` tokens, none above the heading in force at the core."""
    start = core.start
    first = blocks[start]
    if room <= 0 or first.strength == HEADING:
        return start
    floor = outline.section_start(first.first)
    used = 0
    for k in reversed(prev):
        b = blocks[k]
        used += b.tokens
        if used > room or b.first < floor:
            break
        start = k
    return start


def _with_overlap(
    cores: list[range], blocks: list[_Block], outline: Outline, max_tokens: int, overlap_tokens: int
) -> list[_Window]:
    windows: list[_Window] = []
    for n, core in enumerate(cores):
        start = core.start
        if n > 0:
            room = min(overlap_tokens, max_tokens - sum(blocks[k].tokens for k in core))
            start = _overlap_start(cores[n - 1], core, blocks, outline, room)
        windows.append(_Window(start, core.start, core[-1]))
    return windows


def _add_sentence_heads(
    windows: list[_Window], blocks: list[_Block], outline: Outline, count_tokens: TokenCounter, max_tokens: int,
    overlap_tokens: int,
) -> None:
    """Extend each overlap with trailing sentences of the next line back, when that line
    (in the previous core, in the same section, a paragraph line: not a heading, list item
    or table row) is too long to come whole but some of its sentences fit the room left.
    The candidates' sentences are counted in one call."""
    wanted: list[tuple[_Window, int, int]] = []  # window, line, room left
    for n, w in enumerate(windows[1:], 1):
        k, prev = w.start - 1, windows[n - 1]
        if k < prev.core or blocks[w.core].strength == HEADING:
            continue
        b = blocks[k]
        core_tokens = sum(x.tokens for x in blocks[w.core : w.end + 1])
        room = min(overlap_tokens, max_tokens - core_tokens) - sum(x.tokens for x in blocks[w.start : w.core])
        if (b.first == b.last and b.begin == 0 and b.end is None and b.strength != HEADING and b.tokens > room > 0
                and b.first >= outline.section_start(blocks[w.core].first)
                and not _UNIT_LINE.match(outline.lines[b.first])):
            wanted.append((w, b.first, room))
    if not wanted:
        return
    lines = outline.lines
    spans = [_sentence_spans(lines[line])[1:] for _, line, _ in wanted]  # never the whole line
    flat = [lines[line][b:e] for (_, line, _), row in zip(wanted, spans, strict=True) for b, e in row]
    counts = iter(count_tokens(flat) if flat else [])
    for (w, _, room), row in zip(wanted, spans, strict=True):
        sizes = [next(counts) for _ in row]
        used = 0
        for (begin, _), size in zip(reversed(row), reversed(sizes), strict=True):
            used += size
            if used > room:
                break
            w.head = begin


def _shrink(w: _Window) -> list[_Window]:
    """A window over a limit, made smaller: drop the sentence head, else an overlap block,
    else halve the core (only the core can be over then, and it holds at least two blocks)."""
    if w.head is not None:
        return [_Window(w.start, w.core, w.end)]
    if w.start < w.core:
        return [_Window(w.start + 1, w.core, w.end)]
    mid = w.core + (w.end - w.core + 1) // 2
    return [_Window(w.core, w.core, mid - 1), _Window(mid, mid, w.end)]


def _fit(
    windows: list[_Window], blocks: list[_Block], lines: list[str], count_tokens: TokenCounter, max_tokens: int,
    overlap_tokens: int,
) -> list[_Window]:
    """Re-count joined windows (and their overlaps) and shrink any over its limit.

    A single block was counted exactly already (lines, pieces and fences alike); only
    multi-block windows are re-counted, all in one batch per round (rounds after the
    first are rare).
    """
    todo = [w for w in windows if w.start != w.end or w.head is not None]
    while todo:
        texts: list[str] = []
        for w in todo:
            texts.append(_window_text(w, blocks, lines))
            overlap = w.start < w.core or w.head is not None
            texts.append(_window_text(w, blocks, lines, end=w.core - 1) if overlap else "")
        counts = count_tokens(texts)
        replaced: dict[int, list[_Window]] = {}
        for k, w in enumerate(todo):
            if counts[2 * k] > max_tokens or counts[2 * k + 1] > overlap_tokens:
                replaced[id(w)] = _shrink(w)
        if not replaced:
            break
        windows = [v for w in windows for v in replaced.get(id(w), [w])]
        todo = [v for parts in replaced.values() for v in parts if v.start != v.end or v.head is not None]
    return windows
