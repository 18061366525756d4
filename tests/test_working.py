"""WorkingMemory: search, isolation, bad input, failing embedders, FIFO, threads, close."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from embedders import BadOutputEmbedder, FailingEmbedder, HashEmbedder, SlowEmbedder, wait_until
from tiermem.clock import ManualClock
from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    NotFoundError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    SerializationError,
)
from tiermem.working.memory import WorkingItem, WorkingMemory

DIM = 32


def fifo_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tiermem-working-fifo"]


def any_working_threads() -> list[threading.Thread]:
    """Cleanup threads and embed-timeout workers."""
    return [t for t in threading.enumerate() if t.name.startswith("tiermem-working")]


def assert_consistent(wm: WorkingMemory) -> None:
    """Every id in an index has metadata and the reverse; sizes add up."""
    with wm._lock:
        indexed: set[int] = set()
        for user, partition in wm._partitions.items():
            assert partition.index.ntotal == len(partition.ids) > 0
            assert all(wm._records[i].item.user_id == user for i in partition.ids)
            indexed |= partition.ids
        assert indexed == set(wm._records)
        assert wm._bytes == sum(r.nbytes for r in wm._records.values())


@pytest.fixture
def wm() -> Iterator[WorkingMemory]:
    memory = WorkingMemory(embedder=HashEmbedder(DIM), fifo_interval_min=None)
    yield memory
    memory.close()


@pytest.fixture
def isolated() -> Iterator[WorkingMemory]:
    memory = WorkingMemory(embedder=HashEmbedder(DIM), fifo_interval_min=None, user_isolation=True)
    yield memory
    memory.close()


def unit(rng: np.random.Generator, n: int = 1) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ------------------------------------------------------------------ seed usage


def test_seed_usage_add_and_search_without_user(wm: WorkingMemory) -> None:
    wm.add("the build failed on the linker step", {"source": "tool:ci"})
    wm.add("user prefers dark roast coffee", {"topic": "prefs"})
    wm.add("weather tomorrow is rainy")
    results = wm.search("which coffee does the user prefer", k=5)
    assert results[0].content == "user prefers dark roast coffee"
    assert len(results) == 3 and results[0].score >= results[1].score >= results[2].score
    top = results[0]
    assert isinstance(top, WorkingItem) and top.metadata["topic"] == "prefs"
    assert set(top.metadata) >= {"timestamp", "source", "user_id", "session_id"}
    assert wm.search("linker", k=1)[0].source == "tool:ci"
    assert_consistent(wm)


def test_metadata_fields_and_returned_copies(wm: WorkingMemory) -> None:
    item_id = wm.add("fact", {"k": 1}, user_id="u", session_id="s", source="chat", timestamp=5.0)
    item = wm.get(item_id)
    assert (item.user_id, item.session_id, item.source, item.timestamp) == ("u", "s", "chat", 5.0)
    assert item.metadata == {
        "k": 1,
        "user_id": "u",
        "session_id": "s",
        "source": "chat",
        "timestamp": 5.0,
    }
    item.metadata["k"] = 2
    wm.search("fact")[0].metadata["k"] = 3
    assert wm.get(item_id).metadata["k"] == 1
    from_meta = wm.add("other", {"user_id": "u", "session_id": "s2"})
    assert wm.get(from_meta).session_id == "s2" and wm.get(from_meta, user_id="u").user_id == "u"


def test_default_embedder_and_dimension() -> None:
    with WorkingMemory(fifo_interval_min=None) as memory:
        assert memory.dimension == 384 and memory.embedder is not None
        assert memory.embedder.model_id == "local/all-MiniLM-L6-v2"
    with WorkingMemory(dimension=1536, fifo_interval_min=None) as memory:
        assert memory.embedder is None  # no 1536-d default: vectors only
        vec = np.ones(1536, dtype=np.float32)
        item_id = memory.add_with_embedding("api-embedded", vec)
        assert memory.search(vec, k=1)[0].id == item_id
        with pytest.raises(ConfigError, match="embedder"):
            memory.add("needs an embedder")
    with pytest.raises(DimensionMismatchError, match="dimension"):
        WorkingMemory(dimension=64, embedder=HashEmbedder(DIM))


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.add(""), InputError),
        (lambda m: m.add("  "), InputError),
        (lambda m: m.add(None), InvalidTypeError),
        (lambda m: m.add(["a list"]), InvalidTypeError),
        (lambda m: m.add("x", "not a dict"), InvalidTypeError),
        (lambda m: m.add("x", {1: "int key"}), InvalidTypeError),
        (lambda m: m.add("x", {"obj": object()}), SerializationError),
        (lambda m: m.add("x", {"user_id": "a"}, user_id="b"), InputError),
        (lambda m: m.add("x", user_id=""), InputError),
        (lambda m: m.add("x", user_id=7), InvalidTypeError),
        (lambda m: m.add("x", timestamp="yesterday"), InvalidTypeError),
        (lambda m: m.add("x", timestamp=float("nan")), InvalidTypeError),
        (lambda m: m.add_with_embedding("x", np.ones(DIM + 1)), DimensionMismatchError),
        (lambda m: m.add_with_embedding("x", np.ones((2, DIM))), DimensionMismatchError),
        (lambda m: m.add_with_embedding("x", np.full(DIM, np.nan)), InputError),
        (lambda m: m.add_with_embedding("x", np.full(DIM, np.inf)), InputError),
        (lambda m: m.add_with_embedding("x", np.zeros(DIM)), InputError),
        (lambda m: m.add_with_embedding("x", ["a"] * DIM), InvalidTypeError),
        (lambda m: m.add_many("one string"), InvalidTypeError),
        (lambda m: m.add_many(["ok", ""]), InputError),
        (lambda m: m.add_many(["a", "b"], [{}]), InputError),
        (lambda m: m.search(""), InputError),
        (lambda m: m.search(3), DimensionMismatchError),
        (lambda m: m.search(np.ones(DIM + 1)), DimensionMismatchError),
        (lambda m: m.search(np.full(DIM, np.nan)), InputError),
        (lambda m: m.search("q", k=0), InvalidSizeError),
        (lambda m: m.search("q", k=2.5), InvalidTypeError),
        (lambda m: m.search("q", recency_bias=1.5), InvalidSizeError),
        (lambda m: m.search("q", filter_metadata=["a"]), InvalidTypeError),
        (lambda m: m.remove("1"), InvalidTypeError),
        (lambda m: m.remove(10_000), NotFoundError),
        (lambda m: m.clear("u", all_users=True), InputError),
    ],
)
def test_bad_input_raises_and_leaves_state_unchanged(
    wm: WorkingMemory, call: object, error: type[Exception]
) -> None:
    wm.add("existing item", user_id="u")
    before = [(i.id, i.content) for i in wm.search("existing item", k=10)]
    with pytest.raises(error):
        call(wm)  # type: ignore[operator]
    assert [(i.id, i.content) for i in wm.search("existing item", k=10)] == before
    assert_consistent(wm)


def test_constructor_validates_options() -> None:
    emb = HashEmbedder(DIM)
    before = len(fifo_threads())
    for kwargs in (
        {"max_memory_mb": 0},
        {"max_memory_mb": -1},
        {"fifo_interval_min": -1},
        {"embed_timeout": 0},
        {"dimension": 0},
        {"recency_half_life_s": 0},
        {"faiss_threads": 0},
        {"max_memory_mb": float("inf")},
    ):
        with pytest.raises(InvalidSizeError):
            WorkingMemory(embedder=emb, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        WorkingMemory(embedder=emb, max_memory_mb="10")  # type: ignore[arg-type]
    assert len(fifo_threads()) == before  # a refused constructor starts no thread


def test_item_larger_than_the_whole_memory_is_refused() -> None:
    with WorkingMemory(embedder=HashEmbedder(DIM), max_memory_mb=0.01) as memory:
        with pytest.raises(ContentTooLargeError, match="max_memory_mb"):
            memory.add("word " * 5000)
        assert len(memory) == 0


# ----------------------------------------------------------------- isolation


def test_isolation_requires_user_id_everywhere(isolated: WorkingMemory) -> None:
    item_id = isolated.add("alice's secret", user_id="alice")
    calls = [
        lambda: isolated.add("no user"),
        lambda: isolated.add_many(["no user"]),
        lambda: isolated.add_with_embedding("no user", np.ones(DIM)),
        lambda: isolated.search("secret"),
        lambda: isolated.remove(item_id),
        lambda: isolated.get(item_id),
        lambda: isolated.clear(),
    ]
    for call in calls:
        with pytest.raises(MissingUserError, match="user_id"):
            call()
    assert len(isolated) == 1
    assert isolated.search("secret", user_id="bob") == []
    with pytest.raises(NotFoundError):
        isolated.remove(item_id, user_id="bob")
    with pytest.raises(NotFoundError):
        isolated.get(item_id, user_id="bob")
    assert isolated.clear("bob") == 0 and len(isolated) == 1
    assert isolated.clear(all_users=True) == 1 and len(isolated) == 0


def test_user_search_is_exact_and_never_crosses_users(isolated: WorkingMemory) -> None:
    rng = np.random.default_rng(0)
    vectors = unit(rng, 600)
    owners = [f"user{i % 7}" for i in range(600)]
    ids = [
        isolated.add_with_embedding(f"item {i}", v, user_id=u)
        for i, (v, u) in enumerate(zip(vectors, owners, strict=True))
    ]
    for q in unit(rng, 25):
        for user in ("user0", "user3"):
            got = isolated.search(q, k=8, user_id=user)
            mine = [i for i, u in enumerate(owners) if u == user]
            expected = sorted(mine, key=lambda i: -float(vectors[i] @ q))[:8]
            assert [r.id for r in got] == [ids[i] for i in expected]
            assert all(r.user_id == user for r in got)
            np.testing.assert_allclose(
                [r.similarity for r in got], [vectors[i] @ q for i in expected], atol=1e-5
            )


def test_search_without_user_merges_all_users_when_isolation_off(wm: WorkingMemory) -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 90)
    for i, v in enumerate(vectors):
        wm.add_with_embedding(f"item {i}", v, user_id=None if i % 3 == 0 else f"u{i % 3}")
    q = unit(rng)[0]
    expected = np.argsort(-(vectors @ q))[:10]
    assert [r.content for r in wm.search(q, k=10)] == [f"item {i}" for i in expected]


# --------------------------------------------------------- filters and recency


def test_filter_metadata_finds_matches_beyond_the_top_k(wm: WorkingMemory) -> None:
    rng = np.random.default_rng(2)
    q = unit(rng)[0]
    for i in range(300):
        wm.add_with_embedding(f"near {i}", q + 0.01 * unit(rng)[0], {"kind": "noise"})
    far = wm.add_with_embedding("far but tagged", -q, {"kind": "wanted"})
    got = wm.search(q, k=3, filter_metadata={"kind": "wanted"})
    assert [r.id for r in got] == [far]
    assert wm.search(q, k=3, filter_metadata={"kind": "absent"}) == []
    assert wm.search(q, k=3, filter_metadata={"missing_key": None}) == []


def test_recency_bias_ranks_exactly(wm: WorkingMemory) -> None:
    rng = np.random.default_rng(3)
    now = time.time()
    vectors = unit(rng, 200)
    stamps = now - rng.uniform(0, 4 * 3600, size=200)
    for i, (v, ts) in enumerate(zip(vectors, stamps, strict=True)):
        wm.add_with_embedding(f"item {i}", v, timestamp=float(ts))
    q = unit(rng)[0]
    for bias in (0.0, 0.3, 0.9, 1.0):
        got = wm.search(q, k=5, recency_bias=bias)
        recency = 0.5 ** ((time.time() - stamps) / 3600.0)
        score = (1 - bias) * (vectors @ q) + bias * recency
        assert [r.content for r in got] == [f"item {i}" for i in np.argsort(-score)[:5]]
    newest = int(np.argmax(stamps))
    assert wm.search(q, k=1, recency_bias=1.0)[0].content == f"item {newest}"


# ------------------------------------------------------- failing embedders


@pytest.mark.parametrize(
    ("embedder", "error"),
    [
        (FailingEmbedder(RuntimeError("model crashed"), dimension=DIM), ProviderError),
        (FailingEmbedder(ProviderTimeoutError("slow"), dimension=DIM), ProviderTimeoutError),
        (
            BadOutputEmbedder(lambda n: np.full((n, DIM), np.nan), dimension=DIM),
            ProviderResponseError,
        ),
    ],
)
async def test_failing_embedder_changes_nothing(embedder: HashEmbedder, error: type) -> None:
    with WorkingMemory(embedder=embedder, fifo_interval_min=None) as memory:
        memory.add_with_embedding("kept", np.ones(DIM))
        for call in (
            lambda: memory.add("new"),
            lambda: memory.add_many(["a", "b"]),
            lambda: memory.search("query"),
        ):
            with pytest.raises(error):
                call()
        with pytest.raises(error):
            await memory.aadd("new")
        with pytest.raises(error):
            await memory.asearch("query")
        assert [i.content for i in memory.search(np.ones(DIM))] == ["kept"]
        assert_consistent(memory)


def test_embedder_of_another_protocol_implementation_with_wrong_dimension() -> None:
    class WrongDim(HashEmbedder):
        @property
        def dimension(self) -> int:
            return DIM  # claims DIM but the base class checks what the model returns

        def _embed_batch(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), DIM * 2), dtype=np.float32)

    with WorkingMemory(embedder=WrongDim(DIM), fifo_interval_min=None) as memory:
        with pytest.raises(DimensionMismatchError):
            memory.add("text")
        assert len(memory) == 0


def test_embed_timeout_sync_and_async() -> None:
    slow = SlowEmbedder(delay=60.0, dimension=DIM)  # answers only when released
    memory = WorkingMemory(embedder=slow, fifo_interval_min=None, embed_timeout=0.1)
    with pytest.raises(ProviderTimeoutError, match="embed_timeout"):
        memory.add("too slow")
    assert slow.calls == []  # gave up before the embedder answered
    assert len(memory) == 0
    slow.release.set()  # let the abandoned worker finish
    slow.release.clear()

    async def run() -> None:
        with pytest.raises(ProviderTimeoutError):
            await memory.aadd("too slow again")
        slow.release.set()  # asyncio.run waits for the abandoned worker thread

    asyncio.run(run())
    assert len(memory) == 0
    assert_consistent(memory)
    memory.close()
    assert wait_until(lambda: not any_working_threads())


# ------------------------------------------------------------------- FIFO


def test_fifo_evicts_oldest_first_on_add() -> None:
    rng = np.random.default_rng(4)
    with WorkingMemory(
        embedder=HashEmbedder(DIM), max_memory_mb=0.02, fifo_interval_min=None
    ) as memory:
        ids = [
            memory.add_with_embedding(f"item {i}", v, user_id=f"u{i % 3}")
            for i, v in enumerate(unit(rng, 100))
        ]
        assert memory.size_mb <= 0.02
        kept = [i.id for i in memory.search(unit(rng)[0], k=100)]
        assert 0 < len(kept) < 100
        assert sorted(kept) == ids[-len(kept) :]  # exactly the newest survive
        assert memory.stats().evicted == 100 - len(kept)
        assert_consistent(memory)


def test_cleanup_after_lowering_the_limit_and_on_the_interval() -> None:
    clock = ManualClock()
    memory = WorkingMemory(
        embedder=HashEmbedder(DIM), max_memory_mb=1, fifo_interval_min=5, clock=clock
    )
    memory.add_many([f"item number {i}" for i in range(200)], user_id="u")
    assert len(memory) == 200
    memory.max_memory_mb = memory.size_mb / 2
    assert clock.settle()  # the cleanup waits for its interval
    clock.advance(299)
    assert clock.settle() and len(memory) == 200 and memory.stats().cleanups == 0
    clock.advance(1)  # five minutes have passed
    assert wait_until(lambda: len(memory) <= 100)
    assert memory.size_mb <= memory.max_memory_mb and memory.stats().cleanups >= 1
    assert_consistent(memory)
    memory.close()
    assert not fifo_threads()


# ------------------------------------------------------- remove, clear, stats


def test_remove_clear_and_stats(wm: WorkingMemory) -> None:
    a = wm.add("apple pie recipe", user_id="u1")
    wm.add_many(["banana bread", "cherry tart"], user_id="u2")
    wm.add("no owner")
    stats = wm.stats()
    assert (stats.items, stats.users, stats.dimension, stats.model_id) == (
        4,
        2,
        DIM,
        "test/hash-32",
    )
    assert wm.stats("u2").items == 2 and 0 < wm.stats("u2").size_mb < stats.size_mb
    with pytest.raises(NotFoundError):
        wm.remove(a, user_id="u2")
    wm.remove(a, user_id="u1")
    with pytest.raises(NotFoundError):
        wm.remove(a)
    assert wm.clear("u2") == 2 and len(wm) == 1
    assert wm.clear() == 1 and len(wm) == 0 and wm.size_mb == 0
    assert_consistent(wm)


async def test_async_twins(wm: WorkingMemory) -> None:
    a = await wm.aadd("async apple", user_id="u")
    ids = await wm.aadd_many(["async banana", "async cherry"], user_id="u")
    b = await wm.aadd_with_embedding("vector item", np.ones(DIM), user_id="u")
    assert (await wm.asearch("apple", k=1, user_id="u"))[0].id == a
    assert (await wm.astats("u")).items == 4
    await wm.aremove(b, user_id="u")
    assert await wm.acleanup() == 0
    assert await wm.aclear("u") == 3
    assert len(ids) == 2 and len(wm) == 0
    await wm.aclose()


# ------------------------------------------------------ concurrency and close


def test_concurrent_adds_searches_removes_stay_consistent() -> None:
    memory = WorkingMemory(
        embedder=HashEmbedder(DIM), max_memory_mb=0.05, fifo_interval_min=0.001, user_isolation=True
    )
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        user = f"user{n % 3}"
        try:
            for i in range(150):
                item_id = memory.add(f"worker {n} item {i}", user_id=user)
                for hit in memory.search(f"item {i}", k=5, user_id=user):
                    assert hit.user_id == user
                if i % 5 == 0:
                    with contextlib.suppress(NotFoundError):  # evicted by FIFO meanwhile
                        memory.remove(item_id, user_id=user)
                if i % 50 == 0:
                    memory.stats()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert memory.size_mb <= 0.05
    assert_consistent(memory)
    memory.close()


def test_close_stops_threads_and_is_idempotent() -> None:
    before = len(any_working_threads())
    memory = WorkingMemory(embedder=HashEmbedder(DIM), fifo_interval_min=5, embed_timeout=1.0)
    memory.add("uses the embed worker")
    assert len(any_working_threads()) == before + 2
    memory.close()
    memory.close()
    assert wait_until(lambda: len(any_working_threads()) == before)
    assert memory.search("embed worker")[0].content == "uses the embed worker"


def test_dropped_memory_stops_its_thread() -> None:
    memory = WorkingMemory(embedder=HashEmbedder(DIM), fifo_interval_min=0.001)
    memory.add("x")
    del memory
    gc.collect()
    assert wait_until(lambda: not fifo_threads())
