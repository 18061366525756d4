"""Keyword queries: the words of a query a full-text search ranks."""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "he",
        "her",
        "him",
        "his",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
"""Words too common to help a keyword search (PostgreSQL's english configuration drops
them too); a query made only of them keeps them."""


def keyword_terms(text: str) -> list[str]:
    """Split a keyword query into plain word tokens (no operators reach the engine).

    Stop words are left out when other words remain: they match most rows, and ranking
    them makes a full-text search several times slower for no gain in what it finds.
    """
    terms = [t.lower() for t in re.findall(r"\w+", text)]
    content = [t for t in terms if t not in STOP_WORDS]
    return (content or terms)[:64]
