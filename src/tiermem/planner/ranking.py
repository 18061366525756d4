"""The planner's candidates and the cues it ranks them by: the pool-relative rescaling,
the generic-line cue, what a line says on its own (a question, its speaker), the times a
query names, the diversity order and the check for a line already shown.

Each works on the whole pool at once (the planner ranks about 300 candidates a prompt);
what depends on a line alone is kept by line (:data:`LINES`).
"""

from __future__ import annotations

import bisect
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import cast

import numpy as np
from typing_extensions import Buffer

from tiermem.planner.temporal import names_a_time, says_when, time_windows
from tiermem.text import term_set, terms


@dataclass(slots=True)
class Candidate:
    """A memory the planner may include, with the evidence for its relevance.

    ``similarity`` is the cosine similarity to the query and ``keyword`` the keyword
    engine's score (higher is better); either may be missing. ``keywords`` is the share of
    the query's keywords the memory holds (set by the planner). ``message_id`` and
    ``previous_id`` link a conversation message to the one before it in its session;
    ``memory_id`` is the long-term store's id of a stored memory; ``vector`` its unit
    embedding, when known, which lets the planner prefer memories that add something new.
    ``current`` is False for a fact a newer version superseded; ``sources`` are the lines
    a fact was read from (shown by :meth:`Context.explain`), ``source_ids`` their message
    ids (a fact adds nothing beside the messages it was read from, so it is left out
    when they are all taken). ``excerpt`` places a passage in its long message;
    ``passages`` is how many passages a long message has (they stand for it in a context);
    ``standing`` marks one of the user's standing instructions or preferences nearest the
    query, or a session summary nearest a query that asks for a summary (offered first);
    ``kind`` is a stored memory's type; ``counted`` the tokens of its line with its
    newline, counted when it was indexed, with the counter's name.

    Slotted: a prompt's 300 candidates are read a dozen times each after the query's
    forward pass has pushed them out of the CPU's caches; without a dict each is 176
    against 272 bytes.
    """

    content: str
    source: str
    similarity: float | None = None
    keyword: float | None = None
    timestamp: datetime | None = None
    importance: float = 0.5
    key: str = ""
    session_id: str | None = None
    message_id: str | None = None
    previous_id: str | None = None
    memory_id: uuid.UUID | None = None
    vector: np.ndarray | None = None
    keywords: float = 0.0
    relevance: float = 0.0
    score: float = 0.0
    current: bool = True
    sources: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    excerpt: Excerpt | None = None
    passages: int = 0
    standing: bool = False
    kind: str = ""
    counted: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Where a passage (or a standing instruction) sits in its message: the message's id,
    who said it and its span of the message's text."""

    message_id: str
    speaker: str
    start: int
    end: int

    def next_to(self, other: Excerpt, join: int) -> bool:
        """Whether this span and ``other``'s (of the same message) meet or overlap, with
        at most ``join`` characters between them."""
        return self.start <= other.end + join and other.start <= self.end + join

    def within(self, other: Excerpt) -> bool:
        """Whether this span lies inside ``other`` (of the same message)."""
        return (
            self.message_id == other.message_id
            and other.start <= self.start
            and self.end <= other.end
        )


class Substrings:
    """``needle in text`` for many needles: a needle is searched for only when its first
    ``GRAM`` characters are somewhere in ``text`` (a set of its slices, made once), which
    most needles' are not (a search scans the whole text: about 1 µs for 400 characters)."""

    GRAM = 8

    def __init__(self, text: str) -> None:
        self.text = text
        self.grams = {text[i : i + self.GRAM] for i in range(len(text) - self.GRAM + 1)}

    def hold(self, needle: str) -> bool:
        """Whether ``needle`` is in the text."""
        if len(needle) >= self.GRAM and needle[: self.GRAM] not in self.grams:
            return False
        return needle in self.text


@lru_cache(maxsize=64)
def substrings(text: str) -> Substrings:
    """The :class:`Substrings` of ``text``, kept: the notes a context shows beside its
    memories (the synopsis, the summary) change far less often than the query."""
    return Substrings(text)


class MarginalRelevance:
    """Candidates best first by ``score - diversity x`` their greatest cosine similarity to
    a candidate already in ``chosen`` (maximal marginal relevance, Carbonell & Goldstein
    1998); the caller appends to ``chosen`` as it takes them.

    Ten lines about the same topic cost ten times the tokens of one and answer little more;
    a question about several things ("What activities has she done with her family?")
    needs lines about each. Candidates without a vector are neither penalized nor penalize.
    Each candidate's ``cost`` (its line's tokens) lets :meth:`best` pass over what cannot
    fit the room left: the room only shrinks, so they are dropped, never ranked again.
    """

    def __init__(
        self,
        ranked: list[Candidate],
        diversity: float,
        chosen: list[Candidate],
        costs: Sequence[int],
    ) -> None:
        self.ranked, self.chosen, self.diversity = ranked, chosen, diversity
        self.costs = np.asarray(costs, dtype=np.int64)
        self.scores = np.array([c.score for c in ranked], dtype=np.float32)
        vectors = [c.vector for c in ranked]
        dimension = next((len(v) for v in vectors if v is not None), 0)
        self.matrix: np.ndarray | None = None
        if diversity > 0 and len(ranked) > 1 and dimension:
            self.matrix = stacked(vectors, dimension)
            if self.matrix is None:  # some without a vector (or of another width): zero rows
                self.matrix = np.zeros((len(ranked), dimension), dtype=np.float32)
                for row, vector in enumerate(vectors):
                    if vector is not None and len(vector) == dimension:
                        self.matrix[row] = vector
        self.penalty = np.zeros(len(ranked), dtype=np.float32)
        self.position = {id(c): row for row, c in enumerate(ranked)}
        self.counted = len(chosen)
        self.room: int | None = None  # the room the scores were last cut to

    def best(self, room: int) -> Candidate | None:
        """The next candidate whose line fits ``room`` (None when none is left)."""
        if not self.ranked:
            return None
        if room != self.room:
            self.scores[self.costs > room] = -np.inf
            self.room = room
        if self.matrix is not None and len(self.chosen) > self.counted:
            for candidate in self.chosen[self.counted :]:  # taken since the last step
                row = self.position.get(id(candidate))
                if row is not None:
                    np.maximum(self.penalty, self.matrix @ self.matrix[row], out=self.penalty)
            self.counted = len(self.chosen)
        marginal = (
            self.scores if self.matrix is None else self.scores - self.diversity * self.penalty
        )
        row = int(marginal.argmax())
        if marginal[row] == -np.inf:
            return None
        self.scores[row] = -np.inf
        return self.ranked[row]


class WordSets:
    """The word sets of the memories taken, by size: what a near duplicate is sought in."""

    def __init__(self) -> None:
        self.sizes: list[int] = []  # ascending
        self.sets: list[frozenset[str]] = []  # in the order of their sizes

    def add(self, words: frozenset[str]) -> None:
        """Keep ``words`` (a memory just taken) among the sets of its size."""
        at = bisect.bisect_right(self.sizes, len(words))
        self.sizes.insert(at, len(words))
        self.sets.insert(at, words)

    def near(self, words: frozenset[str], limit: float) -> bool:
        """Whether ``words`` overlaps a set taken by the Jaccard ``limit`` or more.

        Jaccard >= t needs the smaller set to hold at least t of the larger, so only the
        sets of a similar size are compared (found by bisection).
        """
        if not words:
            return False
        size = len(words)
        low = bisect.bisect_left(self.sizes, math.ceil(size * limit))
        high = bisect.bisect_right(self.sizes, math.floor(size / limit))
        for other in self.sets[low:high]:
            shared = len(words & other)  # the union's size follows: no union built
            if shared >= limit * (size + len(other) - shared):
                return True
        return False


def specific(candidates: Sequence[Candidate], weight: float) -> list[float | None]:
    """Each candidate's similarity to the query less ``weight`` x its similarity to the
    mean of the pool's vectors.

    Some lines are near every query about a conversation ("Thanks, that's so sweet!"), so
    they are near most of the pool too; a line that answers is near the query more than
    it is near the rest. A candidate without a vector is taken as typical (the pool's
    mean). Only the ranking reads this: the floor checks the similarity itself.
    """
    similarities = [c.similarity for c in candidates]
    if not weight:
        return similarities
    vectors = [c.vector for c in candidates]
    dimension = next((len(v) for v in vectors if v is not None), 0)
    rows: list[int] | None = None  # each has a vector (the usual case)
    matrix = stacked(vectors, dimension)
    if matrix is None:
        rows = [i for i, v in enumerate(vectors) if v is not None and len(v) == dimension]
        present = cast("list[np.ndarray]", [vectors[i] for i in rows])
        if len(present) < 2:
            return similarities
        matrix = np.concatenate(present, dtype=np.float32).reshape(len(present), dimension)
    elif len(matrix) < 2:
        return similarities
    near = matrix @ matrix.mean(axis=0)
    if rows is None:
        generic = near.tolist()
    else:
        generic = [float(near.mean())] * len(candidates)  # no vector: typical
        for i, value in zip(rows, near.tolist(), strict=True):
            generic[i] = value
    return [
        None if s is None else s - weight * g for s, g in zip(similarities, generic, strict=True)
    ]


def stacked(vectors: Sequence[np.ndarray | None], dimension: int) -> np.ndarray | None:
    """``vectors`` as the rows of one float32 matrix (read-only), or None unless each is
    a contiguous one-dimensional float32 array and together they hold ``dimension``
    values each (every vector of a pool comes from one embedder: a width above and one
    below that cancel out are not looked for). Their bytes joined, and the kinds checked
    by a set: 60 against 100 µs for 300 vectors (``len()`` of each cost 35 µs)."""
    try:
        if {v.dtype for v in vectors} != {_FLOAT32} or {v.ndim for v in vectors} != {1}:  # type: ignore[union-attr]
            return None
        joined = b"".join(cast("Sequence[Buffer]", vectors))
    except (AttributeError, TypeError):  # one is missing, or not contiguous
        return None
    if len(joined) != _FLOAT32.itemsize * dimension * len(vectors):
        return None
    return np.frombuffer(joined, dtype=np.float32).reshape(len(vectors), dimension)


_FLOAT32 = np.dtype(np.float32)


def line_facts(content: str) -> tuple[bool, str | None, bool]:
    """What the ranking reads of a memory's line alone: whether it asks
    (:func:`asks_question`), who said it, were it a message (``"speaker: text"``;
    lower-cased), and whether it says when (:func:`~tiermem.planner.temporal.says_when`, read
    for every candidate of a query that asks when), kept by line (:data:`LINES`)."""
    name, said, _ = content.partition(": ")
    found = LINES[content] = (
        asks_question(content),
        name.lower() if said else None,
        says_when(content),
    )
    if len(LINES) > KEPT_LINES:
        LINES.clear()
    return found


LINES: dict[str, tuple[bool, str | None, bool]] = {}
""":func:`line_facts` of each line seen (the same memories come back query after query)."""
KEPT_LINES = 10_000
"""Lines kept at most (the cache starts over when full; as the text module's caches)."""


def windows_named(query: str, candidates: Sequence[Candidate]) -> list[tuple[datetime, datetime]]:
    """The time windows ``query`` names, each year the candidates span tried for a date
    without one (the years gathered only when the query names a time)."""
    if not names_a_time(query):
        return []
    return time_windows(query, {c.timestamp.year for c in candidates if c.timestamp is not None})


def named_speakers(query: str, speakers: Sequence[str | None]) -> set[str]:
    """The pool's ``speakers`` (who said each message candidate: :func:`line_facts`)
    whose names ``query`` holds (every word of the name), or none when it names all of
    them or none: then who said a line tells nothing."""
    pool = {s for s in speakers if s is not None}
    asked = term_set(query)
    named = {s for s in pool if (parts := terms(s)) and asked.issuperset(parts)}
    return named if named != pool else set()


_SUMMARY = re.compile(
    r"\b(?:summar\w*|overview|recap|outline|overall|so far|progress\w*|walk me through"
    r"|how (?:has|have|did|does|do) .{0,60}\b(?:go|gone|going|progress\w*|evolv\w*|develop\w*))",
    re.IGNORECASE,
)


def asks_summary(query: str) -> bool:
    """Whether ``query`` asks for a summary of a theme or a period ("summarize", "how has
    my project progressed", "give me an overview"): session summaries answer it."""
    return bool(_SUMMARY.search(query))


def asks_question(content: str) -> bool:
    """Whether a memory's line is a question: it ends with "?" and is no longer than
    :data:`QUESTION_CHARS` (a long request that ends by asking, "I moved the deadline to
    April 15 and ... can you help?", states what it asks about)."""
    return len(content) <= QUESTION_CHARS and content.rstrip().endswith("?")


QUESTION_CHARS = 500
"""The longest line read as a question (every LoCoMo turn is shorter)."""


def rescale(values: list[float | None]) -> list[float]:
    """Map scores so the pool's median is 0 and its best 1 (missing and below: 0)."""
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    present.sort()
    median = present[len(present) // 2]
    span = present[-1] - median
    if span <= 0:
        return [1.0 if v is not None else 0.0 for v in values]
    return [0.0 if v is None or v < median else (v - median) / span for v in values]
