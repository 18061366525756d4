"""ConversationMemory, MemoryManager (incl. persistence across processes) and the patterns:
validation, isolation, concurrency and the ugly cases. Plumbing uses the hashing embedder;
semantic behaviour with MiniLM is in test_patterns_semantic.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from embedders import FailingEmbedder, HashEmbedder
from tiermem.errors import (
    ConfigError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    ProviderError,
)
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.patterns import (
    ConversationMemory,
    CoordinatedMemorySystem,
    EpisodicMemory,
    HierarchicalMemory,
    MemoryManager,
    RAGMemory,
    SharedMemoryPool,
    manage_token_limit,
)

TESTS = Path(__file__).parent


def _call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


# -- ConversationMemory --------------------------------------------------------------------


def test_messages_are_immutable_once_added() -> None:
    memory = ConversationMemory()
    message = Message("user", "hi")
    memory.add_message(message)
    with pytest.raises(InputError, match="already in this memory"):
        memory.add_message(message)
    with pytest.raises(InvalidTypeError, match="message"):
        memory.add_message({"role": "user", "content": "hi"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        memory.message_index["x"] = message  # type: ignore[index]
    assert memory.get_messages() == [message]
    with pytest.raises(InvalidTypeError):
        memory.get_recent("3")  # type: ignore[arg-type]


def test_window_keeps_tool_call_with_its_results_and_reindexes() -> None:
    memory = ConversationMemory(max_messages=3)
    memory.add_message(Message("user", "look it up"))
    memory.add_message(Message("assistant", "", tool_calls=[_call("c1")]))
    memory.add_message(Message("tool", "42", tool_call_id="c1"))
    memory.add_message(Message("assistant", "It is 42."))
    roles = [m.role for m in memory.get_messages()]
    assert roles in (["assistant", "tool", "assistant"], ["assistant"])
    assert set(memory.message_index) == {m.message_id for m in memory.get_messages()}


def test_summarizer_folds_what_leaves_the_window() -> None:
    from tiermem.summaries.summarize import ExtractiveSummarizer

    memory = ConversationMemory(max_messages=2, summarizer=ExtractiveSummarizer())
    for text in ["My sister Ana lives in Porto since 2019.", "ok", "ok then", "fine"]:
        memory.add_message(Message("user", text))
    formatted = memory.to_llm_format()
    assert formatted[0]["role"] == "system" and "Porto" in formatted[0]["content"]
    assert [m["content"] for m in formatted[1:]] == ["ok then", "fine"]


def test_concurrent_adds_keep_every_message_once() -> None:
    memory = ConversationMemory()
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(200):
            memory.add_message(Message("user", f"{n}-{i}"))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(memory) == 1600 and len(memory.message_index) == 1600


# -- MemoryManager ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"retention_policy": "forever"}, ConfigError),
        ({"max_messages": 0}, InvalidSizeError),
        ({"summarize_threshold": -1}, InvalidSizeError),
        ({"auto_summarize": "yes"}, InvalidTypeError),
        ({"user_id": ""}, InvalidTypeError),
    ],
)
def test_manager_rejects_bad_settings(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        MemoryManager(**kwargs)  # type: ignore[arg-type]


def test_manager_limits_and_auto_summarize() -> None:
    manager = MemoryManager(max_messages=4)
    memory = manager.get_memory("a")
    for i in range(10):
        memory.add_message(Message("user", f"m{i}"))
    assert [m.content for m in memory.get_messages()] == ["m6", "m7", "m8", "m9"]
    assert memory.summary is None

    summarizing = MemoryManager(max_messages=50, auto_summarize=True, summarize_threshold=3)
    conv = summarizing.get_memory("a")
    for text in ["Bob's birthday is 12 March 1990.", "noted", "anything else", "no", "bye"]:
        conv.add_message(Message("user", text))
    assert len(conv) == 3 and "12 March 1990" in (conv.summary or "")
    with pytest.raises(InvalidTypeError):
        summarizing.get_memory("")
    with pytest.raises(ConfigError, match="persistent"):
        summarizing.save()


def _persistent(path: Path, **kw: object) -> MemoryManager:
    memory = Memory(str(path), embedder=HashEmbedder(32))
    return MemoryManager("persistent", memory=memory, **kw)  # type: ignore[arg-type]


def test_persistent_restores_in_a_new_process(tmp_path: Path) -> None:
    db = tmp_path / "conversations.db"
    manager = _persistent(db, max_messages=4, user_id="u1")
    memory = manager.get_memory("researcher")
    memory.add_message(Message("user", "look up Q4", metadata={"session_id": "s1"}))
    memory.add_message(Message("assistant", "", tool_calls=[_call("c1")]))
    memory.add_message(Message("tool", '{"sales": 1500000}', tool_call_id="c1", name="lookup"))
    memory.add_message(Message("assistant", "Q4 sales were 1.5M."))
    memory.add_message(Message("user", "thanks"))
    expected = [m.to_dict() for m in memory.get_messages()]
    manager.apply_retention_policy()
    manager.get_memory("writer").add_message(Message("user", "draft the intro"))
    manager.apply_retention_policy()
    manager._memory.close()  # type: ignore[union-attr]

    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(TESTS)!r})
        from embedders import HashEmbedder
        from tiermem.memory import Memory
        from tiermem.patterns import MemoryManager
        memory = Memory({str(db)!r}, embedder=HashEmbedder(32))
        manager = MemoryManager("persistent", max_messages=4, memory=memory, user_id="u1")
        other = MemoryManager("persistent", memory=memory, user_id="u2")
        print(json.dumps({{
            "researcher": [m.to_dict() for m in manager.get_memory("researcher").get_messages()],
            "writer": [m.content for m in manager.get_memory("writer").get_messages()],
            "other_user": len(other.get_memory("researcher")),
            "searchable": [h.record.content for h in memory.search("Q4 sales", "u1", k=3)],
        }}))
        memory.close()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(TESTS.parent / "src")},
    )
    import json

    restored = json.loads(out.stdout)
    assert restored["researcher"] == expected
    assert restored["writer"] == ["draft the intro"]
    assert restored["other_user"] == 0
    assert any("Q4 sales were 1.5M." in c for c in restored["searchable"])


def test_persistent_keeps_messages_that_left_the_window_before_a_save(tmp_path: Path) -> None:
    manager = _persistent(tmp_path / "m.db", max_messages=2)
    memory = manager.get_memory("a")
    for i in range(6):
        memory.add_message(Message("user", f"fact number {i}"))
    assert manager.save() == 6
    assert manager.save() == 0  # nothing new
    store = manager.persistence.memory.store
    rows = store.index.list("default", agent_id="a", memory_type="message")
    assert sorted(r.metadata["message"]["content"] for r in rows) == [
        f"fact number {i}" for i in range(6)
    ]
    memory.clear()
    manager.save()
    fresh = _persistent(tmp_path / "m.db")
    assert fresh.get_memory("a").get_messages() == []
    assert fresh.forget("a") == 7
    assert store.index.count("default") == 0
    manager.close()


def test_persistent_save_failure_changes_nothing(tmp_path: Path) -> None:
    memory = Memory(
        str(tmp_path / "f.db"), embedder=FailingEmbedder(ProviderError("down"), dimension=32)
    )
    manager = MemoryManager("persistent", memory=memory)
    conv = manager.get_memory("a")
    conv.add_message(Message("user", "hello"))
    with pytest.raises(ProviderError):
        manager.apply_retention_policy()
    assert memory.store.index.count("default") == 0
    memory._tiers._embedder = HashEmbedder(32)  # the provider is back
    manager.persistence.memory.store.embedder = memory.embedder
    assert manager.save() == 1


def test_persistent_save_retried_after_its_state_failed_duplicates_nothing(
    tmp_path: Path,
) -> None:
    # the message rows are written, then the state row's embedding fails: the next save
    # writes the same rows again (the store gives their ids back) and then the state
    embedder = FailingEmbedder(ProviderError("down"), ok_calls=2, dimension=32)
    memory = Memory(str(tmp_path / "r.db"), embedder=embedder)
    manager = MemoryManager("persistent", memory=memory)
    conv = manager.get_memory("a")
    conv.add_message(Message("user", "first"))
    assert manager.save() == 1  # one embedding: the row and the new state together
    conv.add_message(Message("user", "second"))
    conv.summary = "greetings"  # a new state line (an unchanged one is embedded from cache)
    with pytest.raises(ProviderError):
        manager.save()  # the rows' embedding succeeds, the state's fails
    embedder.ok_calls = 100  # the provider is back
    assert manager.save() == 1
    rows = memory.list_memories("default", agent_id="a", memory_type="message")
    assert sorted(r.metadata["message"]["content"] for r in rows) == ["first", "second"]
    restored = MemoryManager("persistent", memory=memory).get_memory("a")
    assert [m.content for m in restored.get_messages()] == ["first", "second"]
    assert restored.summary == "greetings"
    memory.close()


def test_persistent_restore_numbers_new_messages_after_rows_of_an_unfinished_save(
    tmp_path: Path,
) -> None:
    # a process died after writing a save's message rows, before its state: a restored
    # conversation must not reuse their positions, or a later message with the same line
    # would be taken for the orphan row (one memory per content) and lost from the window
    manager = _persistent(tmp_path / "o.db")
    conv = manager.get_memory("a")
    conv.add_message(Message("user", "hello"))
    manager.save()
    store = manager.persistence
    orphan = store._message_row("a", 1, Message("user", "hi again"))
    store.memory.remember_many([orphan], "default")  # what the dead save had written
    again = _persistent(tmp_path / "o.db")
    conv = again.get_memory("a")
    conv.add_message(Message("user", "hi again"))  # the same line as the orphan
    assert again.save() == 1
    restored = _persistent(tmp_path / "o.db").get_memory("a")
    assert [m.content for m in restored.get_messages()] == ["hello", "hi again"]
    assert [m.message_id for m in restored.get_messages()][1] == conv.messages[1].message_id
    manager.close()


# -- patterns ---------------------------------------------------------------------------------


def test_episodic_recall_returns_none_when_nothing_is_close() -> None:
    episodic = EpisodicMemory(embedder=HashEmbedder(64), min_similarity=0.5)
    assert episodic.recall_episode("anything") is None
    episodic.add_message(Message("user", "alpha beta gamma"))
    episodic.start_new_episode()
    assert episodic.recall_episode("zeta eta theta") is None
    with pytest.raises(InputError):
        episodic.recall_episode("  ")
    with pytest.raises(InvalidTypeError):
        episodic.start_new_episode("topic")  # type: ignore[arg-type]
    with pytest.raises(InvalidSizeError):
        EpisodicMemory(embedder=HashEmbedder(), min_similarity=2)


async def test_episodic_async_twins() -> None:
    episodic = EpisodicMemory(embedder=HashEmbedder(64))
    episodic.add_message(Message("user", "renew the passport before june"))
    episodic.start_new_episode()
    assert await episodic.arecall_episode("passport renew") is episodic.episodes[0]
    assert (await episodic.asummarize_episodes()) == episodic.summarize_episodes()


def test_hierarchical_validation_and_duplicates() -> None:
    memory = HierarchicalMemory(working_size=3, embedder=HashEmbedder(64))
    with pytest.raises(InvalidSizeError):
        memory.add_message_with_importance(Message("user", "x"), 1.5)
    with pytest.raises(InvalidTypeError):
        memory.add_message_with_importance(Message("user", "x"), "high")  # type: ignore[arg-type]
    message = Message("user", "keep me")
    memory.add_message_with_importance(message, 0.9)
    with pytest.raises(InputError):
        memory.add_message_with_importance(message, 0.9)
    assert len(memory.core_memory) == 1 and len(memory.working_memory) == 1
    for text in ["the boiler code is 7781", "weather chat", "more chat", "even more"]:
        memory.add_message_with_importance(Message("user", text), 0.2)
    context = memory.get_context_for_llm(query="boiler code", k=1)
    assert context[0]["content"] == "keep me"
    assert context[1] == {
        "role": "system",
        "content": "Relevant earlier messages:\nuser: the boiler code is 7781",
    }
    assert [m["content"] for m in context[2:]] == ["weather chat", "more chat", "even more"]


def test_shared_pool_persists_insights_per_user(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "s.db"), embedder=HashEmbedder(64))
    pool = SharedMemoryPool(memory=memory, user_id="team1")
    pool.share_insight("analyst", "EMEA revenue grew 12 percent")
    pool.share_insight("critic", "the survey sample is too small")
    again = SharedMemoryPool(memory=memory, user_id="team1")
    assert [m.content for m in again.shared_insights] == [
        "[Shared by analyst]: EMEA revenue grew 12 percent",
        "[Shared by critic]: the survey sample is too small",
    ]
    assert SharedMemoryPool(memory=memory, user_id="team2").shared_insights == []
    relevant = again.get_shared_context(query="survey sample", k=1)
    assert [m.metadata["source"] for m in relevant] == ["critic"]
    with pytest.raises(MissingUserError):
        SharedMemoryPool(memory=memory)
    with pytest.raises(InputError):
        pool.share_insight("analyst", " ")
    memory.close()


def test_broadcast_is_all_or_nothing() -> None:
    pool = SharedMemoryPool()
    a, b = pool.register_agent("a"), pool.register_agent("b")
    message = Message("system", "stand-up at 10")
    b.add_message(message)
    with pytest.raises(InputError, match="already broadcast"):
        pool.broadcast_message(message)
    assert a.get_messages() == [] and pool.global_memory.get_messages() == []


def test_coordinated_facts_persist_and_filter_by_query(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "c.db"), embedder=HashEmbedder(64))
    system = CoordinatedMemorySystem(memory=memory, user_id="u")
    system.register_fact("researcher", "the launch date is 3 october")
    system.register_fact("finance", "the budget cap is 40k euros")
    system.get_agent_memory("writer").add_message(Message("user", "write the press release"))
    restored = CoordinatedMemorySystem(memory=memory, user_id="u")
    context = restored.get_agent_context("writer", query="budget cap euros", k=1)
    assert [m.content for m in context] == ["the budget cap is 40k euros"]
    assert context[0].metadata == {"discovered_by": "finance"}
    memory.close()


async def test_rag_dimension_mismatch_and_failures_leave_state_unchanged() -> None:
    rag = RAGMemory(HashEmbedder(32))
    await rag.add_with_embedding(Message("user", "first message"))
    rag.embedding_model = None  # type: ignore[assignment]
    rag._vectors.embedding_model = HashEmbedder(16)
    with pytest.raises(DimensionMismatchError):
        await rag.add_with_embedding(Message("user", "second"))
    failing = RAGMemory(FailingEmbedder(ProviderError("down"), dimension=32))
    with pytest.raises(ProviderError):
        await failing.add_with_embedding(Message("user", "x"))
    assert len(failing) == 0 and failing.embeddings == []
    assert await RAGMemory(HashEmbedder(32)).retrieve_relevant("nothing yet") == []


def test_rag_sync_twin_rejects_an_async_only_model() -> None:
    class AsyncOnly:
        async def embed(self, text: str) -> list[float]:
            return [1.0, 0.0]

    with pytest.raises(InvalidTypeError, match="async"):
        RAGMemory(AsyncOnly()).add(Message("user", "x"))
    with pytest.raises(InvalidTypeError, match="embed"):
        RAGMemory(object())


def test_manage_token_limit_keeps_tool_groups_and_validates() -> None:
    memory = ConversationMemory()
    memory.add_message(Message("user", "q"))
    memory.add_message(Message("assistant", "", tool_calls=[_call("c1")]))
    memory.add_message(Message("tool", "x " * 200, tool_call_id="c1"))
    memory.add_message(Message("assistant", "done"))
    kept = manage_token_limit(memory, max_tokens=50)
    assert [m.content for m in kept] == ["done"]  # the call and its big result go together
    assert manage_token_limit(memory, max_tokens=0) == []
    with pytest.raises(InvalidSizeError):
        manage_token_limit(memory, max_tokens=-1)
    with pytest.raises(InvalidTypeError):
        manage_token_limit("not a memory", 10)
