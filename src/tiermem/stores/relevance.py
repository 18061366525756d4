"""A search hit's score: its relevance to the query in [0, 1], the same for every query,
every ``k`` and every engine.

The score of a memory is a function of the query and the memory alone: the cosine
similarity of their embeddings and the share of the query's keywords the memory holds
(:func:`keyword_share`: stems, stop words left out, counted in Python, not the engine's
text rank, which differs between FTS5 and PostgreSQL and grows with the query's length),
through a logistic curve (:func:`relevance`). The curve was fitted on LoCoMo (five
conversations, 760 questions, with all-MiniLM-L6-v2): it is the odds that a turn with
this similarity and these keywords is one that answers the question rather than another
turn of the same conversation, the hard case (they are about the same people), at even
odds before looking; 0.5 is as likely one as the other. Another embedding model puts
its cosines elsewhere: measure before thresholding. Another memory of the same user,
the ranks a search gave it, or how many results were asked for never change it.

Hybrid search gathers the nearest memories by meaning and the best by words, fuses
their ranks (reciprocal rank fusion, kept in the evidence) and answers them by score;
:func:`rescore` gives a vector or keyword search's hits the same score.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import Any

from tiermem.stores.validate import check_vector
from tiermem.text import query_stems, stems
from tiermem.types.records import MemoryRecord, SearchEvidence, SearchResult

SLOPE = 12.0
"""How steeply the score rises with the evidence (per unit of similarity)."""
KEYWORD_WEIGHT = 0.5
"""What holding every keyword of the query adds to the similarity."""
MIDPOINT = 7.0 / 12.0
"""The evidence (similarity + KEYWORD_WEIGHT x keywords) that scores 0.5."""
WORDS_SLOPE, WORDS_MIDPOINT = 10.0, 0.3
"""The curve of a keyword search's score (the query is not embedded): the share of the
query's keywords alone, 0.5 at 0.3 of them."""
RECOMMENDED_MIN_SCORE = 0.2
"""The ``min_score`` the docs recommend: it keeps nearly all the turns that answer a
LoCoMo question and leaves out what is unrelated (docs/benchmarks.md, LoCoMo: the
share of each it keeps and leaves out)."""
RRF_K = 60
"""The fusion's rank offset: each list adds ``1 / (RRF_K + rank)``."""


def relevance(similarity: float | None, keywords: float) -> float:
    """The score of a memory: ``1 / (1 + exp(-12 (similarity + 0.5 keywords - 7/12)))``.

    Args:
        similarity: the cosine similarity of the query's and the memory's embeddings;
            None when the query was not embedded (keyword search): the keywords alone,
            ``1 / (1 + exp(-10 (keywords - 0.3)))``.
        keywords: the share of the query's keywords the memory holds (0 to 1).
    """
    if similarity is None:
        evidence = WORDS_SLOPE * (keywords - WORDS_MIDPOINT)
    else:
        evidence = SLOPE * (similarity + KEYWORD_WEIGHT * keywords - MIDPOINT)
    return 1.0 / (1.0 + math.exp(-evidence))


def keyword_share(query: str, content: str) -> float:
    """The share of the query's keyword stems (:func:`tiermem.text.query_stems`) that
    ``content`` holds: 0 to 1, 0 for a query without words."""
    asked = query_stems(query)
    if not asked:
        return 0.0
    return len(asked.intersection(stems(content))) / len(asked)


def similarity_of(record: MemoryRecord, vector: Any, found: float | None) -> float | None:
    """The record's cosine similarity to the query ``vector``, computed from its stored
    embedding (both unit length) so it is the same whichever list found it; ``found``
    (the vector search's) when the record came without its embedding."""
    embedding = record.embedding
    if vector is None or embedding is None:
        return found
    return float(embedding @ vector)


def fuse(
    query: str,
    vector: Any,
    vector_hits: Sequence[SearchResult],
    keyword_hits: Sequence[SearchResult],
    limit: int,
) -> list[SearchResult]:
    """Hybrid search's answer: the memories of both lists, scored by :func:`relevance`,
    best first (ties in the fusion's order), the ``limit`` best. Each hit's evidence
    holds its place and score in each list, its fusion value ``sum(1 / (60 + rank))``
    and its place in the fusion's order (``fused_rank``)."""
    fused: dict[uuid.UUID, float] = {}
    records: dict[uuid.UUID, MemoryRecord] = {}
    places: dict[uuid.UUID, list[tuple[int, float] | None]] = {}
    for n, ranking in enumerate((vector_hits, keyword_hits)):
        for rank, hit in enumerate(ranking, start=1):
            key = hit.record.id
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank)
            records.setdefault(key, hit.record)
            places.setdefault(key, [None, None])[n] = (rank, hit.score)
    order = sorted(fused, key=lambda i: -fused[i])
    hits = []
    for fused_rank, key in enumerate(order, start=1):
        record = records[key]
        near, words = places[key]
        similarity = similarity_of(record, vector, near[1] if near else None)
        keywords = keyword_share(query, record.content)
        evidence = SearchEvidence(
            rrf=fused[key],
            vector_rank=near[0] if near else None,
            similarity=similarity,
            keyword_rank=words[0] if words else None,
            keyword_score=words[1] if words else None,
            keywords=keywords,
            fused_rank=fused_rank,
        )
        hits.append(SearchResult(record, relevance(similarity, keywords), evidence))
    hits.sort(key=lambda h: -h.score)  # stable: equal scores keep the fusion's order
    return hits[:limit]


def rescore(query: str, vector: Any, hits: Sequence[SearchResult], mode: str) -> list[SearchResult]:
    """A vector or keyword search's hits (scored by cosine, or by the engine's text
    rank) scored by :func:`relevance` instead, best first; the search's own score and
    place go to the evidence. A keyword search's query has no vector: its hits are
    scored by their keywords alone."""
    if vector is not None:  # unit length, as the store holds the query's vector
        vector = check_vector(vector, len(vector), "vector")
    out = []
    for rank, hit in enumerate(hits, start=1):
        keywords = keyword_share(query, hit.record.content)
        if mode == "keyword":
            similarity = None
            evidence = SearchEvidence(keyword_rank=rank, keyword_score=hit.score, keywords=keywords)
        else:
            similarity = similarity_of(hit.record, vector, hit.score)
            evidence = SearchEvidence(vector_rank=rank, similarity=similarity, keywords=keywords)
        out.append(SearchResult(hit.record, relevance(similarity, keywords), evidence))
    out.sort(key=lambda h: -h.score)
    return out
