"""A search hit's score (tiermem.stores.relevance): a relevance in [0, 1] from the query
and the memory alone, the same at every k, low for an unrelated memory."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedders import minilm
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.memory import Memory
from tiermem.stores.relevance import RECOMMENDED_MIN_SCORE, fuse, keyword_share, relevance, rescore
from tiermem.types.checks import check_min_score
from tiermem.types.records import MemoryRecord, SearchResult, utcnow


def _record(content: str, embedding: list[float]) -> MemoryRecord:
    vector = np.asarray(embedding, dtype=np.float32)
    now = utcnow()
    return MemoryRecord(
        id=uuid.uuid4(),
        user_id="u",
        content=content,
        embedding=vector / np.linalg.norm(vector),
        created_at=now,
        accessed_at=now,
    )


def test_relevance_is_a_calibrated_curve_of_similarity_and_keywords() -> None:
    assert relevance(7 / 12, 0.0) == pytest.approx(0.5)
    assert relevance(1.0, 1.0) > 0.999 and relevance(-0.03, 0.0) < 0.001
    assert relevance(0.5, 1.0) > relevance(0.5, 0.5) > relevance(0.5, 0.0)
    assert relevance(0.6, 0.0) > relevance(0.4, 0.0)
    assert relevance(None, 0.3) == pytest.approx(0.5)  # keyword search: the words alone
    assert relevance(None, 1.0) > 0.99 and relevance(None, 0.0) < 0.05
    assert all(0.0 < relevance(s, k) < 1.0 for s in (-1.0, 0.0, 1.0) for k in (0.0, 1.0))


def test_keyword_share_counts_the_query_stems_a_memory_holds() -> None:
    assert keyword_share("green tea", "prefers green tea over coffee") == 1.0
    assert keyword_share("what food allergy", "is allergic to peanuts") == 0.5  # "allergic"
    assert keyword_share("green tea", "a red bicycle") == 0.0
    assert keyword_share("!!!", "anything") == 0.0  # a query without words


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf])
def test_min_score_outside_zero_to_one_is_refused(bad: float) -> None:
    with pytest.raises(InvalidSizeError) as raised:
        check_min_score(bad)
    assert raised.value.field == "min_score"


@pytest.mark.parametrize("bad", [True, "0.3", None])
def test_min_score_that_is_not_a_number_is_refused(bad: object) -> None:
    with pytest.raises(InvalidTypeError) as raised:
        check_min_score(bad)
    assert raised.value.field == "min_score"


def test_fuse_scores_by_relevance_and_keeps_the_fusion_as_evidence() -> None:
    """The order is the score's, not the fusion's: a memory first in the keyword list
    alone but far from the query by meaning scores below one near it; the evidence keeps
    the places, the fusion value and the fused rank."""
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    near = _record("tea with lemon", [0.9, 0.1, 0.0])
    worded = _record("green tea green tea", [0.0, 0.0, 1.0])
    both = _record("green tea every morning", [1.0, 0.05, 0.0])
    vector = [SearchResult(both, 0.99), SearchResult(near, 0.9)]
    keyword = [SearchResult(worded, 3.0), SearchResult(both, 2.5)]
    hits = fuse("green tea", query, vector, keyword, limit=10)
    assert [h.record for h in hits] == [both, near, worded]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        e = hit.evidence
        assert e is not None and e.similarity is not None and e.keywords is not None
        assert hit.score == relevance(e.similarity, e.keywords)
        assert e.similarity == pytest.approx(float(hit.record.embedding @ query))
    first = hits[0].evidence
    assert first is not None
    assert (first.vector_rank, first.keyword_rank, first.fused_rank) == (1, 2, 1)
    assert first.rrf == pytest.approx(1 / 61 + 1 / 62) and first.keyword_score == 2.5
    worded_evidence = hits[2].evidence
    assert worded_evidence is not None and worded_evidence.vector_rank is None
    assert worded_evidence.similarity == pytest.approx(0.0, abs=1e-6)  # from its embedding
    assert [h.record for h in fuse("green tea", query, vector, keyword, limit=1)] == [both]
    assert "fused #1 rrf 0.0325" in hits[0].explain() and "keywords 1.00" in hits[0].explain()


def test_rescore_gives_vector_and_keyword_hits_the_same_relevance() -> None:
    query = np.array([2.0, 0.0, 0.0], dtype=np.float32)  # not unit length: normalized
    a = _record("green tea", [1.0, 0.0, 0.0])
    b = _record("a red bicycle", [0.8, 0.6, 0.0])
    vector = rescore("green tea", query, [SearchResult(b, 0.8), SearchResult(a, 1.0)], "vector")
    assert [h.record for h in vector] == [a, b]
    assert vector[0].score == relevance(1.0, 1.0)
    assert vector[1].evidence is not None and vector[1].evidence.vector_rank == 1
    both = fuse("green tea", query / 2, [SearchResult(a, 1.0)], [SearchResult(a, 1.0)], 1)
    assert both[0].score == vector[0].score  # the same memory, the same query: one score
    words = rescore("green tea", None, [SearchResult(b, 2.0), SearchResult(a, 1.0)], "keyword")
    assert [h.record for h in words] == [a, b] and words[0].score == relevance(None, 1.0)
    assert words[1].evidence is not None and words[1].evidence.keyword_score == 2.0


# -- on a Memory with the default embedder -------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(str(tmp_path / "memory.db"), embedder=minilm()) as m:
        yield m


@pytest.mark.slow
def test_an_unrelated_memory_scores_low_and_the_right_one_high(memory: Memory) -> None:
    """The issue's case: the answer scored 0.500 beside an unrelated memory's 0.492
    (ranks, not relevance). Now the unrelated one scores near 0 and min_score leaves it
    out."""
    memory.remember("I have a greyhound named Pixel", "ana")
    memory.remember("The quarterly budget meeting is on Monday at 10", "ana")
    memory.remember("Prefers window seats on long flights", "ana")
    hits = memory.search("what dog do I have", "ana", k=3)
    scores = {h.record.content: h.score for h in hits}
    assert hits[0].record.content == "I have a greyhound named Pixel"
    assert scores["I have a greyhound named Pixel"] > 0.5
    assert scores["The quarterly budget meeting is on Monday at 10"] < 0.05
    kept = memory.search("what dog do I have", "ana", k=3, min_score=RECOMMENDED_MIN_SCORE)
    assert [h.record.content for h in kept] == ["I have a greyhound named Pixel"]
    evidence = hits[-1].evidence
    assert evidence is not None and evidence.similarity is not None
    assert evidence.similarity < 0.2 and evidence.rrf is not None


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_a_memory_scores_the_same_at_k_1_and_at_k_50(memory: Memory, mode: str) -> None:
    """A rank changed with k (a memory's place among more of the others); its relevance
    does not: every hit of a small search scores the same in a search of everything."""
    lines = [f"note {i}: the roof was fixed on day {i} by {n}" for i, n in enumerate(range(60))]
    texts = [*lines, "the garden fence was painted green"]
    memory.remember_many([{"content": t} for t in texts], "ana")
    for query in ("when was the fence painted", "which day was the roof fixed"):
        (first,) = memory.search(query, "ana", k=1, mode=mode)
        few = memory.search(query, "ana", k=5, mode=mode)
        every = {h.record.id: h.score for h in memory.search(query, "ana", k=61, mode=mode)}
        assert every[first.record.id] == first.score
        assert all(every[h.record.id] == h.score for h in few)
        assert all(0.0 <= s <= 1.0 for s in every.values())
