"""Passages: a long message cut along its own structure, so the part that answers can be
found and shown without the rest.

A pasted document, a log or a long answer mixes many topics; one vector of all of it
matches none of them well, and taken whole it fills a context. :func:`cut` splits a text
into spans of at most ``max_chars`` characters at the seams the text itself has: fenced
code blocks (kept whole up to twice ``max_chars``), blank-line paragraphs, list items and
headings, then sentences, then spaces. Adjacent small pieces are packed together, and a
heading or a line that introduces what follows (ending with ``:``) stays with it.

The spans are character offsets into the text, so a passage can be shown as an excerpt of
its message and the message found again whole.
"""

from __future__ import annotations

import re

__all__ = ["cut"]

_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_BLANK = re.compile(r"\n[ \t]*\n")
_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)]|#{1,6})[ \t]")
_SENTENCE = re.compile(r"(?<=[.!?…])[\"')\]]*\s+")
_CODE_STRETCH = 2
"""A code block is kept whole up to this many times ``max_chars``."""

Span = tuple[int, int]


def cut(text: str, max_chars: int = 800, min_chars: int = 200) -> list[Span]:
    """Spans ``(start, end)`` of ``text``'s passages, in order, covering every
    non-blank character once; each at most ``max_chars`` long (a code block up to twice
    that) and, where the text's seams allow, at least ``min_chars``."""
    if max_chars < 1 or min_chars < 0:
        raise ValueError("max_chars must be >= 1 and min_chars >= 0")
    units = [u for u in _units(text, max_chars) if text[u[0] : u[1]].strip()]
    return _pack(text, units, max_chars, min_chars)


def _units(text: str, max_chars: int) -> list[Span]:
    """The smallest pieces a passage is built of: code blocks, list items, paragraphs
    (or, when longer than ``max_chars``, their sentences and words)."""
    units: list[Span] = []
    cursor = 0
    for fence in _FENCE.finditer(text):
        units += _prose(text, cursor, fence.start(), max_chars)
        units += _code(text, fence.start(), fence.end(), max_chars)
        cursor = fence.end()
    units += _prose(text, cursor, len(text), max_chars)
    return units


def _code(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """A code block whole, or cut between lines when over the stretch."""
    if end - start <= _CODE_STRETCH * max_chars:
        return [(start, end)]
    return _lines(text, start, end, max_chars)


def _prose(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Paragraphs between ``start`` and ``end``; list items and headings apart."""
    units: list[Span] = []
    for a, b in _split(text, start, end, _BLANK):
        lines = _lines(text, a, b, None)
        if len(lines) > 1 and any(_ITEM.match(text, x) for x, _ in lines):
            blocks = _items(text, lines)
        else:
            blocks = [(a, b)]
        for x, y in blocks:
            units += [(x, y)] if y - x <= max_chars else _sentences(text, x, y, max_chars)
    return units


def _items(text: str, lines: list[Span]) -> list[Span]:
    """Lines grouped so each list item or heading starts a block (its continuation lines
    stay with it)."""
    blocks: list[Span] = []
    for a, b in lines:
        if blocks and not _ITEM.match(text, a):
            blocks[-1] = (blocks[-1][0], b)
        else:
            blocks.append((a, b))
    return blocks


def _sentences(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Sentences of a long paragraph (a sentence over ``max_chars`` cut at spaces)."""
    units: list[Span] = []
    for a, b in _split(text, start, end, _SENTENCE, keep=True):
        units += [(a, b)] if b - a <= max_chars else _words(text, a, b, max_chars)
    return units


def _words(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Pieces of at most ``max_chars``, cut at the last space before the limit."""
    units: list[Span] = []
    while end - start > max_chars:
        limit = start + max_chars
        space = text.rfind(" ", start + max_chars // 2, limit)
        stop = space if space > start else limit
        units.append((start, stop))
        start = stop
    units.append((start, end))
    return units


def _lines(text: str, start: int, end: int, max_chars: int | None) -> list[Span]:
    """The lines of ``text[start:end]``; with ``max_chars``, packed into pieces of at
    most that (a longer line cut at spaces)."""
    lines: list[Span] = []
    a = start
    while a < end:
        newline = text.find("\n", a, end)
        b = end if newline < 0 else newline + 1
        lines.append((a, b))
        a = b
    if max_chars is None:
        return lines
    pieces: list[Span] = []
    for a, b in lines:
        for x, y in _words(text, a, b, max_chars) if b - a > max_chars else [(a, b)]:
            if pieces and y - pieces[-1][0] <= max_chars:
                pieces[-1] = (pieces[-1][0], y)
            else:
                pieces.append((x, y))
    return pieces


def _split(
    text: str, start: int, end: int, seam: re.Pattern[str], keep: bool = False
) -> list[Span]:
    """``text[start:end]`` split at ``seam`` (the seam's characters between the pieces,
    or, with ``keep``, at the end of the piece before it)."""
    pieces: list[Span] = []
    a = start
    for match in seam.finditer(text, start, end):
        b = match.end() if keep else match.start()
        pieces.append((a, b))
        a = match.end()
    pieces.append((a, end))
    return pieces


def _pack(text: str, units: list[Span], max_chars: int, min_chars: int) -> list[Span]:
    """Consecutive units joined while the passage stays within ``max_chars``: a unit joins
    the passage before it when either is under ``min_chars`` or the passage ends with a
    heading or an introduction (a line ending with ``:``)."""
    passages: list[Span] = []
    for a, b in units:
        if passages:
            start, end = passages[-1]
            joined = b - start <= max_chars
            small = end - start < min_chars or b - a < min_chars
            if joined and (small or _introduces(text, start, end)):
                passages[-1] = (start, b)
                continue
        passages.append((a, b))
    return [_trimmed(text, a, b) for a, b in passages]


def _introduces(text: str, start: int, end: int) -> bool:
    """Whether a passage ends with a heading or a line ending with ``:``."""
    tail = text[start:end].rstrip()
    last = tail[tail.rfind("\n") + 1 :]
    return last.endswith(":") or last.lstrip().startswith("#")


def _trimmed(text: str, start: int, end: int) -> Span:
    """The span without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
