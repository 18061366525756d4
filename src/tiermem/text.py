"""Words of a text: terms, stop words, stems and sentences.

One implementation for every reader of text: the stores' keyword search, the planner,
facts and summaries. A *term* is a lower-cased ``\\w+`` run; a *stem* its first five
letters (a crude stemmer: "painted" and "painting" meet "paint"). Outside the engine's
full-text search, a text's keyword relevance to a query is one figure,
:func:`keyword_matches`: how many of the query's keyword stems it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_TERM = re.compile(r"\w+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.:/-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\n+")
_CACHE = 10_000
"""Texts whose terms and stems each cache keeps: the planner folds and stems the same
candidates call after call. It was 100,000, which let a serving process grow by up to
~400 MB with the number of distinct texts it ever saw (the cost curve: 180 MB more after
serving 200 users of a 1M-message store than of a 100k one). The caches hold tuples and
strings, which the garbage collector stops walking once they are old: as frozensets,
20,000 cached sets made every full collection 55 ms, a pause on one call in 25."""
STEM_LETTERS = 5
MAX_QUERY_TERMS = 64

_STOP_WORD_TEXT = (
    "a about an and are as at be been but by can could did do does for from had has have "
    "he her him his how i if in into is it its me my of on or our she so than that the "
    "their them then there these they this those to was we were what when where which who "
    "whom why will with would you your"
)
_FILLER_TEXT = (
    "above after again against all also am amazing any awesome because before being below "
    "between both cool doing down during each few further glad good great having hello here "
    "hers herself hey hi himself itself just let like lot love more most much myself nice "
    "no nor not now off oh ok okay once only other ours ourselves out over own really same "
    "should some sound sounds such thank thanks theirs themselves through too totally under "
    "until up very while wow yeah yes yours yourself yourselves"
)
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())
"""Words too common to help a keyword search (PostgreSQL's english configuration drops
them too); a query made only of them keeps them."""
FILLER_WORDS = STOP_WORDS | frozenset(_FILLER_TEXT.split())
"""Stop words, more function words and chat filler: what carries no content in a summary."""


def terms(text: str) -> list[str]:
    """The lower-cased ``\\w+`` terms of ``text``, in order."""
    return _TERM.findall(text.lower())


@lru_cache(maxsize=_CACHE)
def distinct_terms(text: str) -> tuple[str, ...]:
    """The distinct terms of ``text`` (a tuple: see :data:`_CACHE`)."""
    return tuple(dict.fromkeys(terms(text)))  # in order: the same in every process


def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text``."""
    return frozenset(distinct_terms(text))


@lru_cache(maxsize=_CACHE)
def folded(text: str) -> str:
    """``text``'s terms joined by a space: case and punctuation folded (a dedup key)."""
    return " ".join(terms(text))


@lru_cache(maxsize=_CACHE)
def stems(text: str) -> tuple[str, ...]:
    """The distinct stems of ``text``: each term's first five letters (a tuple: see
    :data:`_CACHE`)."""
    return tuple(dict.fromkeys(term[:STEM_LETTERS] for term in distinct_terms(text)))


def keyword_terms(text: str) -> list[str]:
    """The terms of a keyword query (plain words: no operator reaches an engine).

    Stop words are left out when other words remain: they match most rows, and ranking
    them makes a full-text search several times slower for no gain in what it finds.
    """
    found = terms(text)
    content = [t for t in found if t not in STOP_WORDS]
    return (content or found)[:MAX_QUERY_TERMS]


@lru_cache(maxsize=1024)
def query_stems(query: str) -> frozenset[str]:
    """The stems of a query's keyword terms (what :func:`keyword_matches` looks for)."""
    return frozenset(term[:STEM_LETTERS] for term in keyword_terms(query))


def keyword_matches(query: str, text: str) -> int:
    """How many of the query's keyword stems ``text`` holds: its keyword relevance."""
    return keyword_counts(query, (text,))[0]


def keyword_counts(query: str, texts: Iterable[str]) -> list[int]:
    """:func:`keyword_matches` of each of ``texts`` (the query's stems found once)."""
    asked = query_stems(query)
    return [len(asked.intersection(stems(text))) for text in texts]


def words(text: str) -> list[str]:
    """The words of ``text`` as written (case, inner apostrophes and hyphens kept; a
    number with its separators, as in ``3.5`` or ``12/05``)."""
    return _WORD.findall(text)


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split on ., !, ?, … followed by space, and on newlines)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
