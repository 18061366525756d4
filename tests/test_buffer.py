"""BufferMemory, ConversationBuffer and BufferRegistry: windows, eviction, safety, bad input."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.buffer.memory import BufferMemory, BufferRegistry, ConversationBuffer
from tiermem.errors import (
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    SerializationError,
)
from tiermem.messages import Message, tool_groups
from tiermem.tokens import get_token_counter


def call(call_id: str) -> Message:
    return Message(
        "assistant",
        "",
        tool_calls=[
            {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )


def result(call_id: str, text: str = "42") -> Message:
    return Message("tool", text, tool_call_id=call_id)


def collect(buffer) -> list[Message]:
    evicted: list[Message] = []
    buffer.add_eviction_consumer(evicted.extend)
    return evicted


class TestCountWindow:
    def test_keeps_the_newest_and_evicts_the_rest_in_order(self) -> None:
        buffer = BufferMemory(buffer_size=3)
        evicted = collect(buffer)
        for i in range(10):
            buffer.add_message("user", f"m{i}")
        assert [m.content for m in buffer.messages] == ["m7", "m8", "m9"]
        assert [m.content for m in evicted] == [f"m{i}" for i in range(7)]
        assert buffer.evicted_count == 7

    def test_size_alias_and_summaries_ring(self) -> None:
        buffer = BufferMemory(size=4, multiplier=3)
        assert buffer.buffer_size == buffer.size == 4
        assert buffer.summaries.maxlen == 12

    def test_unbounded_when_no_window(self) -> None:
        buffer = BufferMemory(buffer_size=None)
        for i in range(500):
            buffer.add_message("user", str(i))
        assert len(buffer) == 500

    def test_get_recent(self) -> None:
        buffer = BufferMemory(buffer_size=10)
        for i in range(6):
            buffer.add_message("user", str(i))
        assert [m.content for m in buffer.get_recent(3)] == ["3", "4", "5"]
        assert len(buffer.get_recent(100)) == 6
        assert buffer.get_recent(0) == []
        with pytest.raises(InvalidTypeError):
            buffer.get_recent("3")  # type: ignore[arg-type]


class TestToolCalls:
    def test_a_call_leaves_with_its_results(self) -> None:
        buffer = BufferMemory(buffer_size=3)
        evicted = collect(buffer)
        buffer.add(call("c1"))
        buffer.add(result("c1"))
        buffer.add_message("assistant", "the answer is 42")
        buffer.add_message("user", "thanks")
        assert [m.role for m in buffer.messages] == ["assistant", "user"]
        assert [m.role for m in evicted] == ["assistant", "tool"]

    def test_a_result_whose_call_left_is_never_kept(self) -> None:
        buffer = BufferMemory(buffer_size=1)
        evicted = collect(buffer)
        buffer.add(call("c1"))
        buffer.add_message("user", "interrupting")
        buffer.add(result("c1"))
        assert [m.role for m in buffer.messages] == ["user"]
        assert [m.role for m in evicted] == ["assistant", "tool"]

    def test_results_that_do_not_follow_their_call_leave_with_it(self) -> None:
        buffer = BufferMemory(buffer_size=4)
        evicted = collect(buffer)
        buffer.add(call("c1"))
        buffer.add_message("user", "meanwhile")
        buffer.add(result("c1"))
        buffer.add_message("user", "a")
        buffer.add_message("user", "b")
        assert all(m.role != "tool" for m in buffer.messages)
        assert [m.role for m in evicted] == ["assistant", "tool"]

    def test_token_window_never_splits_a_call_from_its_results(self) -> None:
        counter = get_token_counter()
        buffer = BufferMemory(buffer_size=None, max_tokens=60, token_counter=counter)
        evicted = collect(buffer)
        for i in range(20):
            buffer.add(call(f"c{i}"))
            buffer.add(result(f"c{i}", "x " * (i % 5)))
            buffer.add_message("assistant", f"done {i}")
            held = buffer.messages
            calls = {c["id"] for m in held for c in (m.tool_calls or ())}
            assert all(m.tool_call_id in calls for m in held if m.role == "tool")
            assert buffer.tokens <= 60
        evicted_calls = {c["id"] for m in evicted for c in (m.tool_calls or ())}
        assert all(m.tool_call_id in evicted_calls for m in evicted if m.role == "tool")

    def test_tool_groups(self) -> None:
        messages = [Message("user", "q"), call("a"), result("a"), Message("assistant", "x")]
        assert [len(g) for g in tool_groups(messages)] == [1, 2, 1]


class TestTokenWindow:
    def test_tokens_stay_within_budget_and_nothing_is_lost(self) -> None:
        counter = get_token_counter()
        buffer = BufferMemory(buffer_size=None, max_tokens=50, token_counter=counter)
        evicted = collect(buffer)
        texts = [f"message {i} " + "word " * (i % 7) for i in range(100)]
        for text in texts:
            buffer.add_message("user", text)
            assert buffer.tokens <= 50
            assert buffer.tokens == sum(counter.count_message(m) for m in buffer.messages)
        assert [m.content for m in evicted + buffer.messages] == texts

    def test_a_message_larger_than_the_window_is_evicted_not_dropped(self) -> None:
        buffer = BufferMemory(max_tokens=10)
        evicted = collect(buffer)
        buffer.add_message("user", "word " * 100)
        assert len(buffer) == 0 and len(evicted) == 1

    def test_both_windows_apply(self) -> None:
        buffer = BufferMemory(buffer_size=2, max_tokens=1000)
        for i in range(5):
            buffer.add_message("user", str(i))
        assert len(buffer) == 2


class TestReading:
    def test_formatted_messages_put_the_summary_first(self) -> None:
        buffer = BufferMemory(buffer_size=5)
        buffer.add_message("user", "hi")
        buffer.summary = "Alice likes tea."
        assert buffer.get_formatted_messages() == [
            {"role": "system", "content": "Previous conversation summary: Alice likes tea."},
            {"role": "user", "content": "hi"},
        ]

    def test_get_context_fits_the_budget(self) -> None:
        counter = get_token_counter()
        buffer = BufferMemory(buffer_size=50, token_counter=counter)
        buffer.summary = "Earlier: the user planned a trip."
        for i in range(30):
            buffer.add_message("user" if i % 2 == 0 else "assistant", f"turn number {i} here")
        context = buffer.get_context(max_tokens=80)
        used = sum(counter.count_message(Message.from_openai(m)) for m in context)
        assert used <= 80
        assert context[0]["content"].startswith("Previous conversation summary")
        assert context[-1]["content"] == "turn number 29 here"
        assert len(buffer.get_context()) == 31

    def test_filter_metadata_partitions_users(self) -> None:
        buffer = BufferMemory(buffer_size=10)
        buffer.add_message("user", "I'm Alice", metadata={"user_id": "user1"})
        buffer.add_message("user", "I'm Bob", metadata={"user_id": "user2"})
        buffer.add_message("user", "no owner")
        assert [m.content for m in buffer.get_messages({"user_id": "user1"})] == ["I'm Alice"]
        assert len(buffer.get_messages()) == 3
        with pytest.raises(InvalidTypeError):
            buffer.get_messages(filter_metadata="user1")  # type: ignore[arg-type]

    def test_formatted_reads_cost_the_window_not_the_history(self) -> None:
        buffer = BufferMemory(buffer_size=20)
        for i in range(5000):
            buffer.add_message("user", str(i))
        assert len(buffer.get_formatted_messages()) == 20


class TestSerialization:
    def test_round_trip_keeps_everything(self) -> None:
        buffer = BufferMemory(buffer_size=4, max_tokens=500, multiplier=2)
        buffer.add(call("c1"))
        buffer.add(result("c1"))
        buffer.add_message("user", {"structured": True}, metadata={"user_id": "u"})
        buffer.summary = "s"
        buffer.summaries.append("s")
        restored = BufferMemory.from_json(buffer.to_json())
        assert restored.to_dict() == buffer.to_dict()
        assert restored.messages == buffer.messages

    def test_to_dict_returns_copies(self) -> None:
        buffer = BufferMemory()
        buffer.add_message("user", "x", metadata={"tags": ["a"]})
        data = buffer.to_dict()
        data["messages"][0]["metadata"]["tags"].append("b")
        assert buffer.messages[0].metadata == {"tags": ["a"]}

    def test_from_dict_honours_the_window_and_hands_over_the_excess(self) -> None:
        big = BufferMemory(buffer_size=None)
        for i in range(10):
            big.add_message("user", str(i))
        data = big.to_dict()
        data["buffer_size"] = 3
        excess: list[Message] = []
        small = BufferMemory.from_dict(data, on_evict=excess.extend)
        assert [m.content for m in small.messages] == ["7", "8", "9"]
        assert [m.content for m in excess] == [str(i) for i in range(7)]

    def test_reads_seed_000_json(self) -> None:
        seed = {
            "messages": [
                {"role": "user", "content": "hi", "timestamp": "2025-01-01T10:00:00"},
                {"role": "assistant", "content": "yo", "metadata": {"user_id": "u"}},
            ],
            "buffer_size": 5,
            "summary": None,
        }
        buffer = BufferMemory.from_json(json.dumps(seed))
        assert [m.content for m in buffer.messages] == ["hi", "yo"]

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ('{"messages": [{"role": "user", "content": "x"}', "buffer"),
            ("[]", "buffer"),
            ('{"messages": "nope"}', "messages"),
            ('{"messages": [{"role": "alien", "content": "x"}]}', "messages[0]"),
            ('{"messages": [{"role": "user", "content": 5}]}', "messages[0]"),
            ('{"messages": [], "buffer_size": -1}', "buffer_size"),
            ('{"messages": [], "summary": 3}', "summary"),
            ('{"messages": [], "summaries": [1]}', "summaries"),
        ],
    )
    def test_malformed_json_raises_naming_the_field(self, text, field) -> None:
        with pytest.raises(SerializationError) as info:
            BufferMemory.from_json(text)
        assert info.value.field == field


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "error"),
        [
            (("robot", "x"), InvalidRoleError),
            (("user", 3.5), InvalidTypeError),
            (("user", "x", "not-a-dict"), InvalidTypeError),
        ],
    )
    def test_bad_messages_leave_the_buffer_unchanged(self, args, error) -> None:
        buffer = BufferMemory(buffer_size=2)
        buffer.add_message("user", "keep me")
        before = buffer.to_dict()
        with pytest.raises(error):
            buffer.add_message(*args)
        assert buffer.to_dict() == before

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"buffer_size": 0},
            {"buffer_size": -3},
            {"max_tokens": 0},
            {"multiplier": 0},
            {"buffer_size": True},
            {"buffer_size": "5"},
        ],
    )
    def test_bad_sizes(self, kwargs) -> None:
        with pytest.raises((InvalidSizeError, InvalidTypeError)):
            BufferMemory(**kwargs)

    def test_extend_validates_everything_first(self) -> None:
        buffer = BufferMemory()
        with pytest.raises(InvalidTypeError):
            buffer.extend([Message("user", "a"), {"role": "user", "content": "b"}])  # type: ignore[list-item]
        assert len(buffer) == 0

    def test_a_failing_consumer_does_not_break_appends_or_other_consumers(self) -> None:
        buffer = BufferMemory(buffer_size=1)

        def broken(messages: list[Message]) -> None:
            raise RuntimeError("boom")

        buffer.add_eviction_consumer(broken)
        evicted = collect(buffer)
        for i in range(3):
            buffer.add_message("user", str(i))
        assert [m.content for m in evicted] == ["0", "1"]
        with pytest.raises(InvalidTypeError):
            buffer.add_eviction_consumer("not callable")  # type: ignore[arg-type]


class TestConcurrency:
    def test_threads_lose_nothing_and_keep_per_thread_order(self) -> None:
        buffer = BufferMemory(buffer_size=50)
        evicted = collect(buffer)
        per_thread = 2000

        def writer(name: str) -> None:
            for i in range(per_thread):
                buffer.add_message("user", f"{name}:{i}")

        threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        everything = [m.content for m in evicted + buffer.messages]
        assert len(buffer) == 50
        assert len(everything) == 4 * per_thread
        for n in range(4):
            mine = [int(c.split(":")[1]) for c in everything if c.startswith(f"t{n}:")]
            assert mine == list(range(per_thread))

    async def test_coroutines_append_concurrently(self) -> None:
        buffer = ConversationBuffer(max_messages=1000)

        async def writer(n: int) -> None:
            for i in range(100):
                await buffer.async_append({"role": "user", "content": f"{n}-{i}"})
                await asyncio.sleep(0)

        await asyncio.gather(*(writer(n) for n in range(5)))
        snapshot = await buffer.async_snapshot()
        assert len(snapshot) == 500

    async def test_async_add_message(self) -> None:
        buffer = BufferMemory(buffer_size=3)
        message = await buffer.aadd_message("user", "hi")
        assert buffer.messages == [message]


class TestConversationBuffer:
    def test_zero_disables_buffering_but_consumers_still_see_messages(self) -> None:
        buffer = ConversationBuffer(max_messages=0)
        evicted = collect(buffer)
        buffer.append({"role": "user", "content": "hi"})
        assert len(buffer) == 0 and [m.content for m in evicted] == ["hi"]
        assert len(ConversationBuffer(enabled=False).__class__(enabled=False)) == 0

    def test_none_keeps_everything(self) -> None:
        buffer = ConversationBuffer(max_messages=None)
        buffer.extend([{"role": "user", "content": str(i)} for i in range(300)])
        assert len(buffer) == 300

    def test_get_messages_and_to_dict_return_copies(self) -> None:
        buffer = ConversationBuffer()
        buffer.append({"role": "user", "content": "x", "metadata": {"k": [1]}})
        buffer.get_messages()[0]["content"] = "changed"
        buffer.to_dict()["messages"][0]["metadata"]["k"].append(2)
        assert buffer.get_messages() == [{"role": "user", "content": "x", "metadata": {"k": [1]}}]

    def test_from_dict_honours_the_window(self) -> None:
        data = {
            "max_messages": 2,
            "messages": [{"role": "user", "content": str(i)} for i in range(5)],
        }
        assert [m["content"] for m in ConversationBuffer.from_dict(data).get_messages()] == [
            "3",
            "4",
        ]

    @pytest.mark.parametrize(
        "data",
        [
            "text",
            {"max_messages": -1, "messages": []},
            {"messages": [{"role": "robot", "content": "x"}]},
            {"messages": [{"role": "user", "content": 3}]},
            {"messages": "nope"},
        ],
    )
    def test_from_dict_rejects_malformed_data(self, data) -> None:
        with pytest.raises(SerializationError):
            ConversationBuffer.from_dict(data)

    @pytest.mark.parametrize(
        ("message", "error"),
        [
            ("hello", InvalidTypeError),
            ({"content": "no role"}, InvalidRoleError),
            ({"role": "user", "content": 7}, InvalidTypeError),
        ],
    )
    def test_bad_appends_leave_it_unchanged(self, message, error) -> None:
        buffer = ConversationBuffer(max_messages=2)
        buffer.append({"role": "user", "content": "keep"})
        with pytest.raises(error):
            buffer.append(message)
        with pytest.raises(error):
            buffer.extend([{"role": "user", "content": "ok"}, message])
        assert buffer.get_messages() == [{"role": "user", "content": "keep"}]

    def test_tool_dicts_are_grouped_too(self) -> None:
        buffer = ConversationBuffer(max_messages=2)
        evicted = collect(buffer)
        buffer.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        )
        buffer.append({"role": "tool", "tool_call_id": "c", "content": "1"})
        buffer.append({"role": "assistant", "content": "done"})
        assert [m["role"] for m in buffer.get_messages()] == ["assistant"]
        assert [m.role for m in evicted] == ["assistant", "tool"]

    def test_token_window(self) -> None:
        buffer = ConversationBuffer(max_messages=None, max_tokens=30)
        for i in range(20):
            buffer.append({"role": "user", "content": f"message number {i}"})
        assert 0 < buffer.tokens <= 30


class TestRegistry:
    def test_one_buffer_per_user_and_session(self) -> None:
        registry = BufferRegistry(lambda user, session: BufferMemory(buffer_size=3))
        a = registry.get("alice", "s1")
        assert registry.get("alice", "s1") is a
        assert registry.get("alice", "s2") is not a
        assert registry.get("bob", "s1") is not a
        assert registry.peek("carol") is None
        assert len(registry) == 3 and ("alice", "s1") in registry

    def test_lru_buffers_are_drained_not_lost(self) -> None:
        drained: list[Message] = []

        def factory(user: str, session: str | None) -> BufferMemory:
            buffer = BufferMemory(buffer_size=10)
            buffer.add_eviction_consumer(drained.extend)
            return buffer

        registry = BufferRegistry(factory, max_buffers=2)
        registry.get("u1").add_message("user", "from u1")
        registry.get("u2").add_message("user", "from u2")
        registry.get("u3")
        assert registry.keys() == [("u2", None), ("u3", None)]
        assert [m.content for m in drained] == ["from u1"]
        registry.drop_user("u2")
        assert [m.content for m in drained] == ["from u1", "from u2"]

    @pytest.mark.parametrize("user", ["", None, 42])
    def test_user_id_is_required(self, user) -> None:
        with pytest.raises(MissingUserError):
            BufferRegistry().get(user)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["msg", "call", "result"]), st.integers(0, 3)), max_size=60),
    st.integers(1, 6),
)
def test_every_message_is_kept_or_evicted_exactly_once(ops, size) -> None:
    buffer = BufferMemory(buffer_size=size)
    evicted = collect(buffer)
    added = []
    for kind, n in ops:
        if kind == "msg":
            message = Message("user", "x")
        else:
            message = call(f"c{n}") if kind == "call" else result(f"c{n}")
        buffer.add(message)
        added.append(message.message_id)
        held = buffer.messages
        assert len(held) <= size
        open_calls = {c["id"] for m in held for c in (m.tool_calls or ())}
        assert all(m.tool_call_id in open_calls for m in held if m.role == "tool")
    seen = [m.message_id for m in evicted] + [m.message_id for m in buffer.messages]
    assert sorted(seen) == sorted(added)


def test_vector_search_embeds_each_message_once() -> None:
    from embedders import HashEmbedder

    seen: list[str] = []

    class Counting(HashEmbedder):
        def _embed_batch(self, texts: list[str]):  # type: ignore[no-untyped-def]
            seen.extend(texts)
            return super()._embed_batch(texts)

    embedder = Counting(cache_size=0)
    buffer = BufferMemory(buffer_size=3)
    for text in ("red apples", "blue sky", "green grass"):
        buffer.add_message("user", text)
    hits = buffer.vector_search("blue sky", embedder, k=1)
    assert [m.content for m, _ in hits] == ["blue sky"]
    buffer.add_message("user", "yellow sun")  # evicts "red apples"
    seen.clear()
    buffer.vector_search("sun", embedder, k=3)
    assert seen == ["sun", "yellow sun"]
    assert set(buffer._vectors) == {m.message_id for m in buffer.messages}
    assert buffer.vector_search("x", embedder, k=0) == []


def test_buffer_bad_input_gets_typed_errors() -> None:
    from tiermem.buffer.memory import BufferMemory
    from tiermem.errors import InvalidSizeError, InvalidTypeError

    deep: object = "x"
    for _ in range(5000):
        deep = {"a": deep}
    buffer = BufferMemory()
    with pytest.raises(InvalidSizeError):
        buffer.add_message("user", "x", timestamp=1e20)
    with pytest.raises(InvalidTypeError):
        buffer.add_message("user", {"a": b"bytes"})
    with pytest.raises(InvalidTypeError):
        buffer.add_message("user", deep)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="bogus"):
        buffer.add_message("user", "x", bogus=1)
    with pytest.raises(InvalidSizeError):
        buffer.get_recent(-1)
    with pytest.raises(InvalidTypeError, match="token_counter"):
        BufferMemory(token_counter="x")  # type: ignore[arg-type]
    assert len(buffer) == 0
