"""TiermemStore against the real langgraph: its store API and a compiled StateGraph."""

from __future__ import annotations

import time
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
)

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, MissingUserError
from tiermem.integrations.langgraph import NamespaceError, TiermemStore
from tiermem.memory import Memory


@pytest.fixture
def store(memory: Memory) -> TiermemStore:
    return TiermemStore(memory)


def test_put_get_update_delete_as_langgraph_documents_them(store: TiermemStore) -> None:
    assert isinstance(store, BaseStore)
    assert store.get(("ana", "profile"), "diet") is None
    store.put(("ana", "profile"), "diet", {"text": "Ana is vegetarian", "since": 2019})
    item = store.get(("ana", "profile"), "diet")
    assert isinstance(item, Item)
    assert (item.namespace, item.key) == (("ana", "profile"), "diet")
    assert item.value == {"text": "Ana is vegetarian", "since": 2019}
    time.sleep(0.01)
    store.put(("ana", "profile"), "diet", {"text": "Ana is vegan", "since": 2021})
    updated = store.get(("ana", "profile"), "diet")
    assert updated is not None and updated.value["text"] == "Ana is vegan"
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert len(store.search(("ana",))) == 1  # updated in place, not added again
    store.delete(("ana", "profile"), "diet")
    assert store.get(("ana", "profile"), "diet") is None
    store.delete(("ana", "profile"), "diet")  # deleting what is gone is not an error


def test_same_key_in_other_namespaces_and_same_text_are_distinct_items(store: TiermemStore) -> None:
    store.put(("ana", "a"), "k", {"text": "same"})
    store.put(("ana", "b"), "k", {"text": "same"})
    store.put(("ana", "a"), "k2", {"text": "same"})
    store.put(("ana", "a/b"), "c", {"text": "x"})  # "a/b/c" as ("a", "b/c") below
    store.put(("ana", "a"), "b/c", {"text": "x"})
    assert len(store.search(("ana",), limit=50)) == 5
    assert store.get(("ana", "a/b"), "c").value == {"text": "x"}  # type: ignore[union-attr]
    assert store.get(("ana", "a"), "b/c").value == {"text": "x"}  # type: ignore[union-attr]


def test_search_by_query_uses_hybrid_search_within_the_prefix(store: TiermemStore) -> None:
    store.put(("ana", "food"), "1", {"text": "Ana loves spicy ramen noodles"})
    store.put(("ana", "food"), "2", {"text": "Ana dislikes olives"})
    store.put(("ana", "travel"), "3", {"text": "Ana flew to Tokyo for ramen"})
    hits = store.search(("ana", "food"), query="ramen noodles")
    assert hits and all(isinstance(h, SearchItem) for h in hits)
    assert hits[0].key == "1" and hits[0].score is not None
    assert {h.namespace for h in hits} == {("ana", "food")}
    everywhere = store.search(("ana",), query="ramen")
    assert {h.key for h in everywhere} >= {"1", "3"}


def test_search_filters_offsets_and_order(store: TiermemStore) -> None:
    for i in range(6):
        store.put(
            ("ana", "notes"),
            f"n{i}",
            {
                "text": f"note {i}",
                "score": i,
                "tag": "even" if i % 2 == 0 else "odd",
                "meta": {"v": i % 3},
            },
        )
    newest_first = [h.key for h in store.search(("ana", "notes"), limit=10)]
    assert newest_first == [f"n{i}" for i in reversed(range(6))]
    assert [h.key for h in store.search(("ana", "notes"), limit=2, offset=1)] == ["n4", "n3"]
    assert {h.key for h in store.search(("ana",), filter={"tag": "even"})} == {"n0", "n2", "n4"}
    assert {h.key for h in store.search(("ana",), filter={"score": {"$gte": 4}})} == {"n4", "n5"}
    assert {h.key for h in store.search(("ana",), filter={"score": {"$gt": 1, "$lt": 3}})} == {"n2"}
    assert {h.key for h in store.search(("ana",), filter={"tag": {"$ne": "even"}})} == {
        "n1",
        "n3",
        "n5",
    }
    assert {h.key for h in store.search(("ana",), filter={"meta": {"v": 0}})} == {"n0", "n3"}
    filtered = store.search(("ana",), query="note", filter={"tag": "odd"}, limit=2, offset=1)
    assert len(filtered) == 2 and all(h.value["tag"] == "odd" for h in filtered)


def test_list_namespaces(store: TiermemStore) -> None:
    store.put(("ana", "a", "x"), "k", {"t": "1"})
    store.put(("ana", "a", "y"), "k", {"t": "2"})
    store.put(("ana", "b"), "k", {"t": "3"})
    store.put(("bob", "a", "x"), "k", {"t": "4"})
    assert store.list_namespaces(prefix=("ana",)) == [
        ("ana", "a", "x"),
        ("ana", "a", "y"),
        ("ana", "b"),
    ]
    assert store.list_namespaces(prefix=("ana", "a")) == [("ana", "a", "x"), ("ana", "a", "y")]
    assert store.list_namespaces(prefix=("ana",), suffix=("x",)) == [("ana", "a", "x")]
    assert store.list_namespaces(prefix=("ana", "*", "y")) == [("ana", "a", "y")]
    assert store.list_namespaces(prefix=("ana",), max_depth=2) == [("ana", "a"), ("ana", "b")]
    assert store.list_namespaces(prefix=("ana",), limit=1, offset=1) == [("ana", "a", "y")]
    with pytest.raises(NamespaceError):
        store.list_namespaces()  # never across users
    with pytest.raises(NamespaceError):
        store.list_namespaces(prefix=("*", "a"))


def test_user_label_maps_langmem_style_namespaces(memory: Memory) -> None:
    store = TiermemStore(memory, user_label=1)
    store.put(("memories", "ana"), "m1", {"content": "Ana's cat is called Miso"})
    assert store.get(("memories", "ana"), "m1") is not None
    assert memory.store.index.count("ana") == 1 and memory.store.index.count("memories") == 0
    assert store.list_namespaces(prefix=("memories", "ana")) == [("memories", "ana")]
    with pytest.raises(NamespaceError):
        store.put(("memories",), "m2", {"content": "no user"})


def test_items_are_tiermem_memories_of_the_user(memory: Memory, store: TiermemStore) -> None:
    store.put(("ana", "preference"), "drink", {"text": "Ana prefers green tea"})
    store.put(("ana", "travel"), "trip", {"text": "Ana visits Kyoto in May"})
    records = {r.metadata["langgraph_key"]: r for r in memory.store.index.list("ana")}
    assert records["drink"].memory_type == "preference"
    assert records["trip"].memory_type == "fact"
    assert records["drink"].content == "preference/drink: Ana prefers green tea"
    context = memory.get_context("what tea does Ana like?", "ana", max_tokens=500)
    assert "green tea" in context.text()


def test_users_are_isolated(store: TiermemStore) -> None:
    store.put(("ana", "secrets"), "pin", {"text": "Ana's pin is 4321"})
    assert store.get(("bob", "secrets"), "pin") is None
    assert store.search(("bob",), query="pin 4321") == []
    assert store.search(("bob",)) == []
    assert store.list_namespaces(prefix=("bob",)) == []
    store.delete(("bob", "secrets"), "pin")
    assert store.get(("ana", "secrets"), "pin") is not None


async def test_async_twins(store: TiermemStore) -> None:
    await store.aput(("ana", "x"), "k", {"text": "async value"})
    item = await store.aget(("ana", "x"), "k")
    assert item is not None and item.value == {"text": "async value"}
    assert [h.key for h in await store.asearch(("ana",), query="async")] == ["k"]
    assert await store.alist_namespaces(prefix=("ana",)) == [("ana", "x")]
    results = await store.abatch(
        [GetOp(("ana", "x"), "k"), PutOp(("ana", "x"), "k", None), GetOp(("ana", "x"), "k")]
    )
    assert results[0] is not None and results[1] is None and results[2] is None


def test_index_option_chooses_the_indexed_text(store: TiermemStore, memory: Memory) -> None:
    store.put(
        ("ana", "doc"), "1", {"title": "Budget", "body": "quarterly numbers"}, index=["title"]
    )
    store.put(("ana", "doc"), "2", {"n": 5}, index=False)
    contents = sorted(r.content for r in memory.store.index.list("ana"))
    assert contents == ["doc/1: Budget", 'doc/2: {"n": 5}']


def test_bad_input_gets_typed_errors(store: TiermemStore) -> None:
    for namespace in [(), ("ana", ""), ("ana", "a.b"), ("ana", 3), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(NamespaceError) as err:
        store.batch([PutOp((), "k", {"a": 1})])
    assert isinstance(err.value, InputError) and err.value.field == "namespace"
    with pytest.raises(NamespaceError):
        store.batch([PutOp(("langgraph",), "k", {"a": 1})])
    with pytest.raises(InvalidTypeError):
        store.batch([PutOp(["ana"], "k", {"a": 1})])  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError) as err:
        store.put(("ana",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
    assert err.value.field == "value"
    with pytest.raises(InvalidTypeError):
        store.put(("ana",), "k", {"blob": b"bytes"})
    with pytest.raises(InvalidTypeError):
        store.batch([PutOp(("ana",), "", {"a": 1})])
    with pytest.raises(InputError):
        store.batch([PutOp(("ana",), "k", {"a": 1}, ttl=5.0)])
    with pytest.raises(InputError):
        store.search(("ana",), filter={"x": {"$regex": "a"}})
    with pytest.raises(InvalidSizeError):
        store.search(("ana",), limit=0)
    with pytest.raises(InvalidSizeError):
        store.search(("ana",), offset=-1)
    with pytest.raises(InvalidTypeError):
        store.batch(GetOp(("ana",), "k"))  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        store.batch(["get"])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError):
        store.batch([ListNamespacesOp(match_conditions=("ana",))])  # type: ignore[arg-type]
    with pytest.raises(InvalidSizeError):
        TiermemStore(store.memory, user_label=-1)
    with pytest.raises(MissingUserError):
        store.list_namespaces(prefix=(" ",))
    with pytest.raises(MissingUserError):
        store.get((" ", "x"), "k")
    with pytest.raises(MissingUserError):
        store.search((" ",), query="x")
    assert store.search(("ana",)) == []  # nothing half-written


class State(TypedDict):
    user_id: str
    text: str
    recalled: list[str]


def remember_node(state: State, runtime: Runtime) -> dict:
    if state["text"].startswith("remember "):
        note = state["text"].removeprefix("remember ")
        runtime.store.put((state["user_id"], "notes"), str(len(note)), {"text": note})  # type: ignore[union-attr]
    return {}


def recall_node(state: State, runtime: Runtime) -> dict:
    hits = runtime.store.search((state["user_id"], "notes"), query=state["text"], limit=3)  # type: ignore[union-attr]
    return {"recalled": [h.value["text"] for h in hits]}


def test_a_langgraph_graph_reads_and_writes_memories_through_it(memory: Memory) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember_node)
    builder.add_node("recall", recall_node)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=TiermemStore(memory))

    graph.invoke({"user_id": "ana", "text": "remember my locker code is 5521", "recalled": []})
    graph.invoke({"user_id": "bob", "text": "remember bob parks on level 3", "recalled": []})
    out = graph.invoke({"user_id": "ana", "text": "what is my locker code?", "recalled": []})
    assert out["recalled"][0] == "my locker code is 5521"
    assert all("bob" not in r for r in out["recalled"])
    bob = graph.invoke({"user_id": "bob", "text": "locker code", "recalled": []})
    assert bob["recalled"] == ["bob parks on level 3"]
    assert [h.record.content for h in memory.search("locker", "ana")] == [
        "notes/22: my locker code is 5521"
    ]


async def test_a_graph_runs_async_through_abatch(memory: Memory) -> None:
    async def write(state: State, runtime: Runtime) -> dict:
        await runtime.store.aput((state["user_id"], "notes"), "k", {"text": state["text"]})  # type: ignore[union-attr]
        hits = await runtime.store.asearch((state["user_id"],), query=state["text"])  # type: ignore[union-attr]
        return {"recalled": [h.value["text"] for h in hits]}

    builder = StateGraph(State)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    graph = builder.compile(store=TiermemStore(memory))
    out = await graph.ainvoke({"user_id": "ana", "text": "async graphs work", "recalled": []})
    assert out["recalled"] == ["async graphs work"]
