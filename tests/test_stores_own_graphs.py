"""A big user's own HNSW graph on a real PostgreSQL (``tiermem.stores.own_graphs``): built
when a search sees a user with enough rows, chosen by the planner for the store's own
statement, rebuilt when a stopped build left it invalid, never made for a small user."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from conformance.conftest import fresh_database
from tiermem.stores.own_graphs import graph_memory_mb, graph_name, keywords_name
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.records import NewMemory

DIM = 8


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def url() -> str:
    return fresh_database("own")


def _open(url: str, partitions: int | None = None) -> PostgresStore:
    return PostgresStore(
        url, dimension=DIM, exact_max_rows=10, own_graph_rows=30, partitions=partitions
    )


def _fill(store: PostgresStore, user: str, n: int, seed: int) -> np.ndarray:
    vectors = _vectors(n, seed)
    store.index.add_many(user, [NewMemory(f"{user} note {i}", v) for i, v in enumerate(vectors)])
    return vectors


def _graph(url: str, name: str) -> tuple[bool, str] | None:
    """(valid, definition) of index ``name``; None: no such index."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_class c"
            " JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            (name,),
        ).fetchone()
    return None if row is None else (bool(row[0]), str(row[1]))


def _plan(url: str, user: str, vector: np.ndarray) -> str:
    """EXPLAIN of the store's HNSW statement for ``user`` (as its vector plan runs it)."""
    literal = "[" + ",".join(str(float(x)) for x in vector) + "]"
    with psycopg.connect(url) as conn:
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        conn.execute("SET LOCAL enable_seqscan = off")  # a tiny table: the index as for a big one
        rows = conn.execute(
            f"EXPLAIN SELECT id FROM memories_{DIM} WHERE user_id = %s"
            " ORDER BY embedding <=> %s::vector LIMIT 5",
            (user, literal),
        ).fetchall()
    return "\n".join(r[0] for r in rows)


def _search_in_a_new_process(url: str, vector: np.ndarray) -> None:
    """Search the big user with a store of its own (a process that has not tried its
    graph yet) and wait for any build that starts."""
    again = _open(url)
    try:
        again.index.search("big", vector=vector, mode="vector", limit=5)
        assert again.own_graphs is not None and again.own_graphs.wait(60)
    finally:
        again.close()


@pytest.fixture
def store(url: str) -> Iterator[PostgresStore]:
    store = _open(url)
    yield store
    store.close()


def test_a_big_user_gets_a_graph_of_their_own_and_the_search_walks_it(
    url: str, store: PostgresStore
) -> None:
    big = _fill(store, "big", 40, 1)
    _fill(store, "small", 20, 2)
    _fill(store, "other", 40, 3)  # big too, but never searched: no graph is made for it
    for user, vector in (("big", big[0]), ("small", big[0])):
        store.index.search(user, vector=vector, mode="vector", limit=5)
    assert store.own_graphs is not None and store.own_graphs.wait(60)
    found = _graph(url, graph_name(store.table, "big"))
    assert found is not None and found[0], found
    assert "hnsw" in found[1] and "WHERE (user_id = 'big'::text)" in found[1]
    assert _graph(url, graph_name(store.table, "small")) is None  # 20 rows: below 30
    assert _graph(url, graph_name(store.table, "other")) is None
    assert graph_name(store.table, "big") in _plan(url, "big", big[0])
    assert graph_name(store.table, "big") not in _plan(url, "other", big[0])
    hits = store.index.search("big", vector=big[7], mode="vector", limit=5)
    exact = np.argsort(-(big @ big[7]))[:5]
    assert [h.record.content for h in hits] == [f"big note {i}" for i in exact]
    words = _graph(url, keywords_name(store.table, "big"))  # and a GIN index of their words
    assert words is not None and words[0], words
    assert "gin (tsv)" in words[1] and "WHERE (user_id = 'big'::text)" in words[1]
    assert _graph(url, keywords_name(store.table, "small")) is None


def test_a_stopped_build_is_built_again_by_the_next_process(url: str, store: PostgresStore) -> None:
    big = _fill(store, "big", 40, 1)
    store.index.search("big", vector=big[0], mode="vector", limit=5)
    assert store.own_graphs is not None and store.own_graphs.wait(60)
    name = graph_name(store.table, "big")
    with psycopg.connect(url, autocommit=True) as conn:  # what a cancelled build leaves
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (name,)
        )
    store.index.search("big", vector=big[0], mode="vector", limit=5)  # this process tried already
    assert store.own_graphs.wait(60)
    assert (_graph(url, name) or (True, ""))[0] is False
    _search_in_a_new_process(url, big[0])
    found = _graph(url, name)
    assert found is not None and found[0]


def test_close_stops_a_build_and_the_next_process_builds_it(url: str) -> None:
    store = _open(url)
    big = _fill(store, "big", 40, 1)
    name = graph_name(store.table, "big")
    with psycopg.connect(url) as reader:  # a snapshot the concurrent build waits for
        reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        reader.execute(f"SELECT count(*) FROM memories_{DIM}").fetchone()
        store.index.search("big", vector=big[0], mode="vector", limit=5)
        assert store.own_graphs is not None and not store.own_graphs.wait(1.0)
        started = time.monotonic()
        store.close()
        assert time.monotonic() - started < 5 and store.own_graphs.wait(5.0)
    found = _graph(url, name)
    assert found is None or found[0] is False  # stopped: never a valid half graph
    _search_in_a_new_process(url, big[0])
    found = _graph(url, name)
    assert found is not None and found[0]


def test_a_plain_table_gets_the_graph_on_the_table(url: str) -> None:
    store = _open(url, partitions=0)
    try:
        big = _fill(store, "big", 40, 1)
        store.index.search("big", vector=big[0], mode="vector", limit=5)
        assert store.own_graphs is not None and store.own_graphs.wait(60)
    finally:
        store.close()
    found = _graph(url, graph_name(f"memories_{DIM}", "big"))
    assert found is not None and found[0] and f" ON public.memories_{DIM} " in found[1]


def test_no_graph_when_turned_off(url: str) -> None:
    store = PostgresStore(url, dimension=DIM, exact_max_rows=10, own_graph_rows=0)
    try:
        big = _fill(store, "big", 40, 1)
        store.index.search("big", vector=big[0], mode="vector", limit=5)
        assert store.own_graphs is None
    finally:
        store.close()
    assert _graph(url, graph_name(f"memories_{DIM}", "big")) is None


def test_names_and_memory() -> None:
    assert graph_name("memories_384", "a") != graph_name("memories_384", "b")
    assert len(graph_name("memories_4096", "x" * 500)) <= 63
    assert keywords_name("memories_384", "a") not in (
        graph_name("memories_384", "a"),
        keywords_name("memories_384", "b"),
    )
    assert len(keywords_name("memories_4096", "x" * 500)) <= 63
    assert graph_memory_mb(10, 384) == 64
    assert 200 <= graph_memory_mb(100_000, 384) <= 300
    assert graph_memory_mb(10_000_000, 384) == 1024


def test_a_forgotten_users_graph_goes_with_their_rows(url: str, store: PostgresStore) -> None:
    """The graph's definition names the user: forgetting them drops it (in the same
    transaction as their rows), and another user's graph stays."""
    big = _fill(store, "big", 40, 1)
    other = _fill(store, "other", 40, 3)
    for user, vector in (("big", big[0]), ("other", other[0])):
        store.index.search(user, vector=vector, mode="vector", limit=5)
    assert store.own_graphs is not None and store.own_graphs.wait(60)
    assert _graph(url, graph_name(store.table, "big")) is not None
    assert _graph(url, keywords_name(store.table, "big")) is not None
    store.index.delete_user("big")
    assert _graph(url, graph_name(store.table, "big")) is None
    assert _graph(url, keywords_name(store.table, "big")) is None
    assert _graph(url, graph_name(store.table, "other")) is not None
    assert _graph(url, keywords_name(store.table, "other")) is not None
    found = store.index.search("other", vector=other[0], mode="vector", limit=1)
    assert [r.record.content for r in found] == ["other note 0"]


def test_a_user_id_with_quotes_gets_and_loses_its_graph(url: str, store: PostgresStore) -> None:
    """The user id is a literal in the graph's definition: quotes are escaped, the
    planner still matches it to the bound id, and forgetting the user drops it."""
    user = 'o\'brien "x"; --'
    vectors = _fill(store, user, 40, 4)
    store.index.search(user, vector=vectors[0], mode="vector", limit=5)
    assert store.own_graphs is not None and store.own_graphs.wait(60)
    found = _graph(url, graph_name(store.table, user))
    assert found is not None and found[0], found
    assert graph_name(store.table, user) in _plan(url, user, vectors[0])
    hits = store.index.search(user, vector=vectors[0], mode="vector", limit=1)
    assert [h.record.content for h in hits] == [f"{user} note 0"]
    assert store.index.delete_user(user) == 40
    assert _graph(url, graph_name(store.table, user)) is None
