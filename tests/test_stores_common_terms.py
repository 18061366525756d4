"""A big user's common words on a real PostgreSQL (``tiermem.stores.common_terms``): the
rarer words of a query choose a big user's keyword matches and every word ranks them; a
small user's search, and a query of common words only, match as before."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from conformance.conftest import fresh_database
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.records import NewMemory

DIM = 8


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    store = PostgresStore(
        fresh_database("common"), dimension=DIM, exact_max_rows=10, own_graph_rows=0
    )
    yield store
    store.close()


def _fill(store: PostgresStore, user: str, texts: list[str]) -> None:
    vectors = np.random.default_rng(1).normal(size=(len(texts), DIM)).astype(np.float32)
    store.index.add_many(user, [NewMemory(t, v) for t, v in zip(texts, vectors, strict=True)])


# Caroline speaks in almost every row; a volcano is in three (one with Caroline's dog).
TEXTS = [f"Caroline: note {i} about the garden" for i in range(80)] + [
    "Caroline: we climbed the volcano",
    "the volcano was quiet",
    "Caroline: my dog saw the volcano",
]


def _words(store: PostgresStore, user: str, query: str) -> list[str]:
    hits = store.index.search(user, query=query, mode="keyword", limit=50, count_access=False)
    return [h.record.content for h in hits]


def test_a_big_users_rare_words_choose_and_every_word_ranks(store: PostgresStore) -> None:
    _fill(store, "big", TEXTS)
    found = _words(store, "big", "Caroline volcano dog")
    assert set(found) == set(TEXTS[80:])  # "caroline" is in every row: it does not choose
    assert found[0] == "Caroline: my dog saw the volcano"  # but it ranks, with "dog"
    assert found[-1] == "the volcano was quiet"
    assert len(_words(store, "big", "Caroline")) == 50  # only common words: they choose (the limit)


def test_a_small_users_words_all_choose(store: PostgresStore) -> None:
    _fill(store, "small", TEXTS[:5] + TEXTS[80:])  # 8 rows: at most exact_max_rows
    assert len(_words(store, "small", "Caroline volcano")) == 8


def test_a_forgotten_users_common_words_are_forgotten(store: PostgresStore) -> None:
    _fill(store, "big", TEXTS)
    assert len(_words(store, "big", "garden volcano")) == 3
    store.index.delete_user("big")
    _fill(store, "big", [f"a volcano {i}" for i in range(30)] + ["a garden"])
    assert len(_words(store, "big", "garden volcano")) == 1  # now "volcano" is common


def test_a_big_users_hits_are_whole_records_that_pass_the_filter(store: PostgresStore) -> None:
    """The matches are ranked by id and fetched after: each hit is the whole record (its
    vector and metadata too), and the filter chooses among the matches."""
    vectors = np.random.default_rng(2).normal(size=(len(TEXTS), DIM)).astype(np.float32)
    store.index.add_many(
        "big",
        [
            NewMemory(t, v, memory_type="fact" if "volcano" in t else "message", metadata={"n": i})
            for i, (t, v) in enumerate(zip(TEXTS, vectors, strict=True))
        ],
    )
    hits = store.index.search(
        "big",
        query="volcano garden",
        mode="keyword",
        limit=50,
        count_access=False,
        memory_type="fact",
    )
    assert {h.record.content for h in hits} == set(TEXTS[80:])
    for h in hits:
        i = TEXTS.index(h.record.content)
        unit = vectors[i] / np.linalg.norm(vectors[i])  # stored normalized
        assert h.record.metadata == {"n": i} and np.allclose(h.record.embedding, unit, atol=1e-6)
