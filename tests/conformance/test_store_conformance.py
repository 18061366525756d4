"""The MemoryStore contract, run unchanged on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import tiermem.stores.ops as ops
from tiermem.errors import (
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidTypeError,
    MissingUserError,
    NotFoundError,
)
from tiermem.stores.ops import AccessOp, AddOp, UpdateOp
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.records import NewMemory, calculate_importance
from tiermem.stores.relevance import keyword_share, relevance
from tiermem.types.checks import MAX_CONTENT_CHARS

from .conftest import DIM

NewUser = Callable[[], str]
rng = np.random.default_rng(7)

INJECTIONS = [
    "'; DROP TABLE memories_8; --",
    '" OR 1=1 --',
    "x') OR ('1'='1",
    '$.a" AND 1=1',
    'NEAR(a b) OR * AND "',
    "%s %(x)s ? :1",
    "🙂 ünïcødé \\ '' \"\"",
]


def vecs(n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return list(np.argsort(-(matrix @ query), kind="stable")[:k])


# --- the store: its parts ---------------------------------------------------------------

STORE_NAMES = 18
"""The most public names a store may have: its parts (``index``, ``transcript``,
``queue``), ``batch`` / ``abatch`` / ``abatch_then``, its lifecycle and settings (SQLite:
14, PostgreSQL: 18); every typed method is a part's (the store had 84 when it inherited
them all: docs/architecture.md)."""


def test_a_store_holds_its_parts_and_few_names(store: MemoryStore) -> None:
    public = {n for n in dir(store) if not n.startswith("_")}
    parts = (store.index, store.transcript, store.queue)
    methods = {n for part in parts for n in dir(part) if not n.startswith("_")}
    assert {"index", "transcript", "queue", "batch", "abatch", "abatch_then"} <= public
    assert len(public) <= STORE_NAMES, sorted(public)
    assert public & methods <= {"dimension", "embedder"}, sorted(public & methods)


# --- add, get, dedup -------------------------------------------------------------------


def test_add_get_roundtrip(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    v = vecs(1)[0] * 3  # stored normalized
    mid = store.index.add(
        user,
        "likes green tea",
        embedding=v,
        memory_type="preference",
        agent_id="a1",
        session_id="s1",
        importance=0.9,
        metadata={"source": "chat", "n": 2},
    )
    rec = store.index.get(user, mid)
    assert rec is not None
    assert (rec.id, rec.user_id, rec.content, rec.memory_type) == (
        mid,
        user,
        "likes green tea",
        "preference",
    )
    assert (rec.agent_id, rec.session_id, rec.importance) == ("a1", "s1", pytest.approx(0.9))
    assert rec.metadata == {"source": "chat", "n": 2}
    assert rec.access_count == 1 and rec.created_at.tzinfo is not None
    assert rec.embedding is not None and np.allclose(
        rec.embedding, v / np.linalg.norm(v), atol=1e-6
    )
    assert len(rec.content_hash) == 64


def test_add_deduplicates_per_user_by_content(store: MemoryStore, new_user: NewUser) -> None:
    alice, bob = new_user(), new_user()
    v = vecs(4)
    ids = store.index.add_many(alice, ["a", "b", "a", "c"], embeddings=v)
    assert ids[0] == ids[2] and len(set(ids)) == 3
    assert store.index.add(alice, "b", embedding=v[0]) == ids[1]
    assert store.index.count(alice) == 3
    assert store.index.add(bob, "a", embedding=v[0]) not in ids  # dedup is per user
    assert store.index.count(bob) == 1


def test_get_many_skips_unknown_and_other_users(store: MemoryStore, new_user: NewUser) -> None:
    alice, bob = new_user(), new_user()
    a = store.index.add_many(alice, ["x", "y"], embeddings=vecs(2))
    b = store.index.add(bob, "z", embedding=vecs(1)[0])
    got = store.index.get_many(alice, [a[1], uuid.uuid4(), b, str(a[0])])
    assert [r.id for r in got] == [a[1], a[0]]
    assert store.index.get(alice, b) is None


# --- search -----------------------------------------------------------------------------


def test_vector_search_matches_exact_ranking(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    m = vecs(120)  # above the PostgreSQL fixture's exact_max_rows: the HNSW path too
    ids = store.index.add_many(user, [f"memory {i}" for i in range(120)], embeddings=m)
    store.index.add_many(new_user(), [f"memory {i}" for i in range(30)], embeddings=vecs(30))
    hits_total = 0
    for q in vecs(5):
        hits = store.index.search(user, vector=q, limit=10)
        expected = [ids[i] for i in exact_top(m, q, 10)]
        hits_total += len({h.record.id for h in hits} & set(expected))
        assert len(hits) == 10
        assert all(h.record.user_id == user for h in hits)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert hits[0].score == pytest.approx(float(m[ids.index(hits[0].record.id)] @ q), abs=1e-4)
    assert hits_total >= 48  # recall >= 0.96 (exact on SQLite, HNSW on PostgreSQL)


def test_search_small_user_among_many_returns_full_limit(
    store: MemoryStore, new_user: NewUser
) -> None:
    small = new_user()
    store.index.add_many(new_user(), [f"big {i}" for i in range(200)], embeddings=vecs(200))
    m = vecs(12)
    ids = store.index.add_many(small, [f"small {i}" for i in range(12)], embeddings=m)
    q = vecs(1)[0]
    hits = store.index.search(small, vector=q, limit=10)
    assert [h.record.id for h in hits] == [ids[i] for i in exact_top(m, q, 10)]


def test_search_filters(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    old = datetime(2020, 1, 1, tzinfo=timezone.utc)
    items = [
        NewMemory(
            "fact s1", memory_type="fact", session_id="s1", agent_id="a", metadata={"k": "v"}
        ),
        NewMemory("pref s1", memory_type="preference", session_id="s1", metadata={"k": 1}),
        NewMemory(
            "fact s2", memory_type="fact", session_id="s2", agent_id="b", metadata={"k": True}
        ),
        NewMemory("old ctx", memory_type="context", created_at=old, metadata={"k": None}),
    ]
    store.index.add_many(user, items, embeddings=vecs(4))
    q = vecs(1)[0]

    def found(**flt: object) -> set[str]:
        return {h.record.content for h in store.index.search(user, vector=q, limit=10, **flt)}

    assert found() == {"fact s1", "pref s1", "fact s2", "old ctx"}
    assert found(memory_type="fact") == {"fact s1", "fact s2"}
    assert found(memory_type=["preference", "context"]) == {"pref s1", "old ctx"}
    assert found(session_id="s1") == {"fact s1", "pref s1"}
    assert found(agent_id="b") == {"fact s2"}
    assert found(created_before=datetime(2021, 1, 1, tzinfo=timezone.utc)) == {"old ctx"}
    assert found(created_after=datetime(2021, 1, 1)) == {"fact s1", "pref s1", "fact s2"}
    assert found(metadata={"k": "v"}) == {"fact s1"}
    assert found(metadata={"k": 1}) == {"pref s1"}
    assert found(metadata={"k": True}) == {"fact s2"}
    assert found(metadata={"k": None}) == {"old ctx"}
    assert found(metadata={"missing": "v"}) == set()
    assert found(memory_type="fact", session_id="s2", metadata={"k": True}) == {"fact s2"}
    assert store.index.count(user, memory_type="fact") == 2
    assert {r.content for r in store.index.list(user, session_id="s1")} == {"fact s1", "pref s1"}


def test_keyword_and_hybrid_search(store: MemoryStore, new_user: NewUser) -> None:
    user, other = new_user(), new_user()
    texts = ["the user drinks green tea", "the user owns a red bicycle", "meeting on monday"]
    m = vecs(3)
    ids = store.index.add_many(user, texts, embeddings=m)
    store.index.add(other, "green tea is also liked by someone else", embedding=vecs(1)[0])
    hits = store.index.search(user, "Green TEA?", mode="keyword")
    assert [h.record.id for h in hits] == [ids[0]]
    assert store.index.search(user, "nothing matches", mode="keyword") == []
    assert store.index.search(user, "!!! ???", mode="keyword") == []
    hybrid = store.index.search(user, "bicycle", vector=m[2], mode="hybrid", limit=3)
    assert {h.record.id for h in hybrid[:2]} == {ids[1], ids[2]}
    assert all(h.record.user_id == user for h in hybrid)


def test_hybrid_scores_are_relevance_with_the_fusion_as_evidence(
    store: MemoryStore, new_user: NewUser
) -> None:
    """A hybrid hit's score is its relevance (:func:`relevance` of its similarity and
    keywords), in [0, 1], best first; its evidence holds both, each list's place and
    score, the fusion value and its place in the fusion's order."""
    user = new_user()
    texts = ["green tea every morning", "green bicycle", "tea with lemon", "monday meeting"]
    m = vecs(4)
    ids = store.index.add_many(user, texts, embeddings=m)
    vector = store.index.search(user, vector=m[0], mode="vector", limit=20, count_access=False)
    keyword = store.index.search(user, "green tea", mode="keyword", limit=20, count_access=False)
    hybrid = store.index.search(user, "green tea", vector=m[0], mode="hybrid", count_access=False)
    assert hybrid[0].record.id == ids[0] and hybrid[0].score > 0.99
    scores = [h.score for h in hybrid]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)
    vector_place = {h.record.id: (n, h.score) for n, h in enumerate(vector, start=1)}
    keyword_place = {h.record.id: (n, h.score) for n, h in enumerate(keyword, start=1)}
    fused = {}
    for hit in hybrid:
        e = hit.evidence
        assert e is not None and e.similarity is not None and e.keywords is not None
        assert hit.score == relevance(e.similarity, e.keywords)
        assert e.keywords == keyword_share("green tea", hit.record.content)
        places = [vector_place.get(hit.record.id), keyword_place.get(hit.record.id)]
        rrf = sum(1 / (60 + place[0]) for place in places if place)
        assert e.rrf == pytest.approx(rrf) and e.fused_rank is not None
        fused[e.fused_rank] = rrf
        assert places[0] is not None and e.vector_rank == places[0][0]  # all four are near
        assert e.similarity == pytest.approx(places[0][1], abs=1e-5)
        assert (e.keyword_rank, e.keyword_score) == (places[1] or (None, None))
        assert f"rrf {e.rrf:.4f}" in hit.explain()
    assert [fused[r] for r in sorted(fused)] == sorted(fused.values(), reverse=True)
    assert vector[0].evidence is None and keyword[0].evidence is None  # the planner's inputs


def test_a_hybrid_hit_scores_the_same_at_every_limit(store: MemoryStore, new_user: NewUser) -> None:
    """The fusion's value of a memory changed with ``limit`` (first by meaning and 26th
    by words, it was in the keyword pool at limit 50 and not at limit 1: 0.50 then 0.85);
    its score does not."""
    user = new_user()
    query = np.eye(DIM, dtype=np.float32)[0]

    def unit(first: float, second: float, third: float = 0.0) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        v[:3] = first, second, third
        unit_vector: np.ndarray = v / np.linalg.norm(v)
        return unit_vector

    memories = [("an apple among many other words of a long line", query)]  # first by meaning
    memories += [(f"filler line number {j}", unit(0.9 - 0.01 * j, 0.5)) for j in range(21)]
    memories += [(f"apple apple apple {i}", unit(-0.1 - 0.001 * i, 0.0, 1.0)) for i in range(25)]
    store.index.add_many(
        user, [c for c, _ in memories], embeddings=np.stack([v for _, v in memories])
    )
    keyword = store.index.search(user, "apple", mode="keyword", limit=50, count_access=False)
    assert keyword[-1].record.content == memories[0][0]  # last by words: out of a pool of 20

    def scores(limit: int) -> dict[uuid.UUID, float]:
        hits = store.index.search(user, "apple", vector=query, mode="hybrid", limit=limit)
        return {h.record.id: h.score for h in hits}

    (first, score), *_ = scores(1).items()
    assert scores(50)[first] == score
    few, many = scores(5), scores(50)
    assert all(many[i] == s for i, s in few.items())


def test_users_lists_every_user_in_order(store: MemoryStore, new_user: NewUser) -> None:
    a, b = sorted([new_user(), new_user()])
    store.index.add(a, "one of a's", embedding=vecs(1)[0])
    store.index.add_many(b, ["one of b's", "two of b's"], embeddings=vecs(2))
    everyone = store.transcript.users(1000)
    assert {a, b} <= set(everyone) and len(everyone) == len(set(everyone))  # each once
    after_a = store.transcript.users(1000, after=a)  # the page after a cursor
    assert b in after_a and a not in after_a and after_a == everyone[everyone.index(a) + 1 :]
    store.index.delete_user(a)
    assert a not in store.transcript.users(1000)


def test_retrieval_counts_accesses(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    m = vecs(2)
    a, _ = store.index.add_many(user, ["one", "two"], embeddings=m)
    before = store.index.list(user)
    assert all(r.access_count == 0 for r in before)
    store.index.get(user, a)
    hits = store.index.search(user, vector=m[0], limit=1)
    assert hits[0].record.id == a and hits[0].record.access_count == 2
    rec = {r.id: r for r in store.index.list(user)}[a]
    assert rec.access_count == 2 and rec.accessed_at >= rec.created_at
    assert store.index.stats(user).total_access_count == 2


def test_keyword_search_ranks_the_newest_matches(
    store: MemoryStore, new_user: NewUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the newest KEYWORD_SCAN matches are ranked, on every engine: what bounds a big
    user's keyword search; older matches are left to vector search."""
    monkeypatch.setattr(ops, "KEYWORD_SCAN", 4)
    if hasattr(store, "_postgres"):  # PostgreSQL: the plan of a big user
        monkeypatch.setattr(store._postgres, "exact_max_rows", 0)
    user = new_user()
    m = vecs(8)
    # the oldest say "kite" most often, so they would rank first if every match were ranked
    ids = [
        store.index.add(user, "kite " * (8 - i) + f"number {i}", embedding=m[i]) for i in range(8)
    ]
    hits = store.index.search(user, "kite", mode="keyword", limit=8, count_access=False)
    assert [h.record.id for h in hits] == ids[4:]


def test_search_without_counting_then_record_access(store: MemoryStore, new_user: NewUser) -> None:
    user, other = new_user(), new_user()
    m = vecs(3)
    a, b = store.index.add_many(user, ["red kite", "blue kite"], embeddings=m[:2])
    (theirs,) = store.index.add_many(other, ["red kite"], embeddings=m[2:])
    hits = store.index.search(user, "kite", mode="keyword", count_access=False)
    hits += store.index.search(user, vector=m[0], mode="hybrid", query="kite", count_access=False)
    assert {h.record.id for h in hits} == {a, b} and all(h.record.access_count == 0 for h in hits)
    assert store.index.stats(user).total_access_count == 0
    assert store.index.record_access(user, [a, str(b), theirs]) == 2  # another user's id: ignored
    assert store.batch([AccessOp(user, (a,), 3)]) == [1]
    counts = {r.id: r.access_count for r in store.index.list(user)}
    assert counts == {a: 4, b: 1}
    assert store.index.list(other)[0].access_count == 0
    assert asyncio.run(store.index.arecord_access(user, [b])) == 1
    assert store.index.record_access(user, []) == 0
    with pytest.raises(InputError):
        store.index.record_access(user, ["not-a-uuid"])
    with pytest.raises(MissingUserError):
        store.index.record_access("", [a])


# --- update, delete, list, count, stats ---------------------------------------------------


def test_update(store: MemoryStore, new_user: NewUser) -> None:
    user, other = new_user(), new_user()
    m = vecs(3)
    a, b = store.index.add_many(user, ["alpha", "beta"], embeddings=m[:2])
    rec = store.index.update(
        user,
        a,
        content="gamma",
        embedding=m[2],
        importance=0.1,
        memory_type="summary",
        metadata={"edited": True},
    )
    assert (rec.content, rec.memory_type, rec.importance, rec.metadata) == (
        "gamma",
        "summary",
        pytest.approx(0.1),
        {"edited": True},
    )
    assert store.index.search(user, vector=m[2], limit=1)[0].record.id == a
    assert store.index.search(user, "gamma", mode="keyword")[0].record.id == a
    assert store.index.add(user, "gamma", embedding=m[0]) == a  # hash follows the new content
    with pytest.raises(InputError):
        store.index.update(user, b, content="gamma", embedding=m[1])
    with pytest.raises(NotFoundError):
        store.index.update(other, a, importance=0.2)
    with pytest.raises(NotFoundError):
        store.index.update(user, uuid.uuid4(), importance=0.2)
    with pytest.raises(InputError):
        store.index.update(user, a, content="needs a vector")  # no embedder
    with pytest.raises(InputError):
        store.index.update(user, a, owner="x")
    assert store.index.get(user, b).content == "beta"  # type: ignore[union-attr]


def test_delete_and_delete_user(store: MemoryStore, new_user: NewUser) -> None:
    alice, bob = new_user(), new_user()
    m = vecs(4)
    ids = store.index.add_many(alice, ["1", "2", "3"], embeddings=m[:3])
    bid = store.index.add(bob, "1", embedding=m[3])
    assert store.index.delete(bob, ids[0]) is False
    assert store.index.delete(alice, ids[0]) is True
    assert store.index.delete(alice, ids[0]) is False
    assert store.index.get(alice, ids[0]) is None
    assert all(h.record.id != ids[0] for h in store.index.search(alice, vector=m[0], limit=5))
    assert store.index.delete_many(alice, [ids[1], bid, uuid.uuid4()]) == 1
    assert store.index.delete_user(alice) == 1
    assert store.index.count(alice) == 0 and store.index.search(alice, vector=m[0]) == []
    assert store.index.count(bob) == 1 and store.index.get(bob, bid) is not None
    assert store.index.delete_user(alice) == 0


def test_list_pages_newest_first(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    items = [NewMemory(f"m{i}", created_at=base + timedelta(minutes=i)) for i in range(25)]
    store.index.add_many(user, items, embeddings=vecs(25))
    pages = [store.index.list(user, limit=10, offset=o) for o in (0, 10, 20, 30)]
    assert [len(p) for p in pages] == [10, 10, 5, 0]
    contents = [r.content for p in pages for r in p]
    assert contents == [f"m{i}" for i in reversed(range(25))]
    assert store.index.count(user) == 25
    assert store.index.count(user, created_after=base + timedelta(minutes=20)) == 5


def test_stats(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    assert store.index.stats(user).count == 0
    store.index.add_many(
        user,
        [NewMemory("a", importance=0.2), NewMemory("b", memory_type="tool", importance=0.6)],
        embeddings=vecs(2),
    )
    stats = store.index.stats(user)
    assert stats.count == 2 and stats.by_type == {"fact": 1, "tool": 1}
    assert stats.mean_importance == pytest.approx(0.4)
    assert stats.oldest is not None and stats.newest is not None and stats.oldest <= stats.newest


def test_calculate_importance_is_seed_formula(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    mid = store.index.add(user, "x", embedding=vecs(1)[0], importance=1.0)
    rec = store.index.get(user, mid)
    assert rec is not None
    now = rec.created_at
    fresh = calculate_importance(rec, now=now)  # recency 1, one access, explicit 1
    assert fresh == pytest.approx(0.3 + 0.3 * np.log(2) / np.log(101) + 0.4)
    later = calculate_importance(rec, now=now + timedelta(days=30))
    assert later == pytest.approx(fresh - 0.15)
    assert 0.0 <= calculate_importance(rec, now=now + timedelta(days=3650)) <= 1.0


# --- async twins ------------------------------------------------------------------------


async def test_async_twins(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    m = vecs(3)
    ids = await store.index.aadd_many(user, ["a", "b"], embeddings=m[:2])
    one = await store.index.aadd(user, "c", embedding=m[2])
    assert (await store.index.aget(user, one)) is not None
    assert len(await store.index.aget_many(user, ids)) == 2
    assert (await store.index.asearch(user, vector=m[0], limit=1))[0].record.id == ids[0]
    assert (await store.index.aupdate(user, one, importance=0.3)).importance == pytest.approx(0.3)
    assert await store.index.acount(user) == 3
    assert len(await store.index.alist(user, limit=2)) == 2
    assert (await store.index.astats(user)).count == 3
    results = await asyncio.gather(*(store.index.asearch(user, vector=q, limit=2) for q in m))
    assert [r[0].record.id for r in results] == [*ids, one]
    assert await store.index.adelete(user, one) is True
    assert await store.index.adelete_many(user, ids[:1]) == 1
    assert await store.index.adelete_user(user) == 1


# --- bad input: typed errors, nothing half-written ---------------------------------------


@pytest.mark.parametrize("bad_user", [None, ""])
def test_missing_user_id_everywhere(store: MemoryStore, bad_user: str) -> None:
    v = vecs(1)[0]
    calls = [
        lambda: store.index.add(bad_user, "x", embedding=v),
        lambda: store.index.add_many(bad_user, ["x"], embeddings=[v]),
        lambda: store.index.get(bad_user, uuid.uuid4()),
        lambda: store.index.search(bad_user, vector=v),
        lambda: store.index.update(bad_user, uuid.uuid4(), importance=0.1),
        lambda: store.index.delete(bad_user, uuid.uuid4()),
        lambda: store.index.delete_user(bad_user),
        lambda: store.index.list(bad_user),
        lambda: store.index.count(bad_user),
        lambda: store.index.stats(bad_user),
    ]
    for call in calls:
        with pytest.raises(MissingUserError):
            call()


def test_wrong_types_and_ids(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    v = vecs(1)[0]
    with pytest.raises(InvalidTypeError):
        store.index.add(123, "x", embedding=v)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        store.index.add(user, 42, embedding=v)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.index.add(user, "   ", embedding=v)
    with pytest.raises(InputError):
        store.index.add(user, "x", embedding=v, memory_type="gossip")
    with pytest.raises(InputError):
        store.index.add(user, "x", embedding=v, importance=1.5)
    with pytest.raises(InputError):
        store.index.add(user, "x", embedding=v, metadata={"f": object()})
    with pytest.raises(InputError):
        store.index.add(user, "x")  # no vector, no embedder
    for bad in ["not-a-uuid", "'; DROP TABLE x; --", 17]:
        with pytest.raises(InputError):
            store.index.get(user, bad)  # type: ignore[arg-type]
        with pytest.raises(InputError):
            store.index.delete(user, bad)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.index.search(user, vector=v, limit=0)
    with pytest.raises(InputError):
        store.index.search(user, vector=v, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.index.search(user, mode="keyword")
    with pytest.raises(InputError):
        store.index.list(user, offset=-1)
    assert store.index.count(user) == 0


def test_dimension_mismatch(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    mid = store.index.add(user, "ok", embedding=vecs(1)[0])
    for bad in [np.ones(DIM + 1), np.ones(DIM - 1), np.ones((2, DIM))]:
        with pytest.raises(DimensionMismatchError):
            store.index.add(user, "bad", embedding=bad)
        with pytest.raises(DimensionMismatchError):
            store.index.search(user, vector=bad)
        with pytest.raises(DimensionMismatchError):
            store.index.update(user, mid, embedding=bad)
    with pytest.raises(DimensionMismatchError):  # one bad row rejects the whole batch
        store.index.add_many(user, ["a", "b"], embeddings=[vecs(1)[0], np.ones(3)])
    with pytest.raises(InputError):
        store.index.add(user, "nan", embedding=np.full(DIM, np.nan))
    with pytest.raises(InputError):
        store.index.add(user, "zero", embedding=np.zeros(DIM))
    assert store.index.count(user) == 1


def test_sql_injection_strings_are_plain_data(store: MemoryStore, new_user: NewUser) -> None:
    victim = new_user()
    store.index.add(victim, "victim memory", embedding=vecs(1)[0])
    for i, evil in enumerate(INJECTIONS):
        user = evil + new_user()
        v = vecs(1)[0]
        mid = store.index.add(
            user, evil, embedding=v, agent_id=evil, session_id=evil, metadata={evil: evil}
        )
        assert store.index.get(user, mid).content == evil  # type: ignore[union-attr]
        assert [
            h.record.id
            for h in store.index.search(
                user, vector=v, agent_id=evil, session_id=evil, metadata={evil: evil}
            )
        ] == [mid]
        assert store.index.search(user, vector=v, metadata={evil: evil + "x"}) == []
        assert store.index.count(user, metadata={evil: evil}) == 1
        store.index.search(user, evil, mode="keyword")
        store.index.search(user, evil, vector=v, mode="hybrid")
        assert store.index.update(user, mid, metadata={evil: i}).metadata == {evil: i}
        assert store.index.delete_user(user) == 1
    assert store.index.count(victim) == 1


def test_huge_content(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    big = ("lorem ipsum dolor " * (MAX_CONTENT_CHARS // 18))[: MAX_CONTENT_CHARS - 10] + " zanzibar"
    mid = store.index.add(user, big, embedding=vecs(1)[0])
    assert store.index.get(user, mid).content == big  # type: ignore[union-attr]
    assert store.index.search(user, "lorem", mode="keyword")[0].record.id == mid
    with pytest.raises(ContentTooLargeError):
        store.index.add(user, "x" * (MAX_CONTENT_CHARS + 1), embedding=vecs(1)[0])
    with pytest.raises(InputError):
        store.index.add(user, "nul\x00byte", embedding=vecs(1)[0])
    assert store.index.count(user) == 1


def test_failed_batch_writes_nothing(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    from tiermem.stores.validate import check_vector

    items = tuple(
        NewMemory(f"row {i}", embedding=check_vector(v, DIM)) for i, v in enumerate(vecs(5))
    )
    with pytest.raises(NotFoundError):
        store.batch([AddOp(user, items), UpdateOp(user, uuid.uuid4(), importance=0.3)])
    assert store.index.count(user) == 0
    assert store.index.search(user, vector=vecs(1)[0]) == []
    store.batch([AddOp(user, items)])
    assert store.index.count(user) == 5


def test_concurrent_adds_of_same_content_keep_one(store: MemoryStore, new_user: NewUser) -> None:
    user = new_user()
    v = vecs(1)[0]
    results: list[uuid.UUID] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(store.index.add(user, "same fact", embedding=v))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert store.index.count(user) == 1


def test_copy_state_is_kept_per_source_and_replaced(store: MemoryStore) -> None:
    from tiermem.stores.copies import CopyStateOp, SaveCopyStateOp

    source = f"/copies/{uuid.uuid4()}.db"
    assert store.batch([CopyStateOp(source)]) == [None]
    state = {"after_user": "ana", "user": "bob", "phase": "messages", "cursor": 12, "rows": 40}
    store.batch([SaveCopyStateOp(source, state)])
    assert store.batch([CopyStateOp(source)]) == [state]
    store.batch([SaveCopyStateOp(source, {**state, "cursor": 30})])
    assert store.batch([CopyStateOp(source)])[0]["cursor"] == 30
    first = store.batch([CopyStateOp(None)])[0]  # any copy's, for the "not empty" check
    assert first is not None and isinstance(first[1], dict)
