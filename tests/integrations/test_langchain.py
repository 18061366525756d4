"""TiermemChatMessageHistory against the real langchain-core."""

from __future__ import annotations

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from tiermem.errors import InputError, InvalidTypeError, MissingUserError
from tiermem.integrations.langchain import TiermemChatMessageHistory
from tiermem.memory import Memory

CONVERSATION = [
    SystemMessage("You are a travel agent."),
    HumanMessage("What is the weather in Lisbon?", id="h1", additional_kwargs={"lang": "en"}),
    AIMessage(
        "",
        tool_calls=[{"id": "call_1", "name": "weather", "args": {"city": "Lisbon", "days": 2}}],
        response_metadata={"model_name": "gpt-x", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17},
    ),
    ToolMessage('{"temp": 21}', tool_call_id="call_1", name="weather", artifact={"raw": [1, 2]}),
    AIMessage("It is 21 degrees and sunny.", name="planner"),
    HumanMessage([{"type": "text", "text": "Thanks!"}, {"type": "text", "text": "Book it."}]),
    ChatMessage(role="critic", content="Looks fine."),
]


def test_is_a_langchain_history_and_keeps_every_message_losslessly(memory: Memory) -> None:
    history = TiermemChatMessageHistory(memory, "ana", "trip")
    assert isinstance(history, BaseChatMessageHistory)
    history.add_messages(CONVERSATION[:3])
    history.add_message(CONVERSATION[3])
    history.add_messages(CONVERSATION[4:])
    assert history.messages == CONVERSATION
    # a new history object over the same memory reads the same thing from the store
    assert TiermemChatMessageHistory(memory, "ana", "trip").messages == CONVERSATION
    tool_call = history.messages[2]
    assert isinstance(tool_call, AIMessage) and tool_call.tool_calls[0]["args"]["days"] == 2


def test_survives_a_restart(tmp_path) -> None:
    from embedders import HashEmbedder

    path = str(tmp_path / "m.db")
    with Memory(path, embedder=HashEmbedder(32)) as first:
        TiermemChatMessageHistory(first, "ana", "s").add_messages(CONVERSATION)
    with Memory(path, embedder=HashEmbedder(32)) as second:
        assert TiermemChatMessageHistory(second, "ana", "s").messages == CONVERSATION


def test_messages_are_tiermem_messages_of_the_session(memory: Memory) -> None:
    TiermemChatMessageHistory(memory, "ana", "trip").add_messages(CONVERSATION)
    context = memory.get_context("weather in Lisbon", "ana", session_id="trip")
    roles = [m["role"] for m in context.messages]
    assert "tool" in roles
    call = next(m for m in context.messages if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "weather"
    memory.flush()
    hits = memory.search("sunny degrees", "ana")
    assert any("21 degrees" in h.record.content for h in hits)


def test_messages_added_through_memory_read_back(memory: Memory) -> None:
    memory.add("user", "Plain hello", "ana", session_id="trip")
    memory.add(
        "assistant",
        "",
        "ana",
        session_id="trip",
        tool_calls=[{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )
    messages = TiermemChatMessageHistory(memory, "ana", "trip").messages
    assert isinstance(messages[0], HumanMessage) and messages[0].content == "Plain hello"
    assert isinstance(messages[1], AIMessage) and messages[1].tool_calls[0]["id"] == "c9"


def test_users_and_sessions_are_isolated(memory: Memory) -> None:
    ana = TiermemChatMessageHistory(memory, "ana", "s1")
    bob = TiermemChatMessageHistory(memory, "bob", "s1")
    ana_other = TiermemChatMessageHistory(memory, "ana", "s2")
    ana.add_messages([HumanMessage("ana's secret: 1234")])
    bob.add_messages([HumanMessage("bob's note")])
    assert [m.content for m in ana.messages] == ["ana's secret: 1234"]
    assert [m.content for m in bob.messages] == ["bob's note"]
    assert ana_other.messages == []
    bob.clear()
    assert bob.messages == [] and [m.content for m in ana.messages] == ["ana's secret: 1234"]
    assert not any("1234" in h.record.content for h in memory.search("secret 1234", "bob"))


def test_clear_deletes_the_session_only(memory: Memory) -> None:
    history = TiermemChatMessageHistory(memory, "ana", "s1")
    history.add_messages(CONVERSATION)
    memory.remember("Ana likes tea.", "ana", session_id="s1")
    TiermemChatMessageHistory(memory, "ana", "s2").add_messages([HumanMessage("other")])
    history.clear()
    assert history.messages == []
    assert memory.store.index.count("ana", session_id="s1", memory_type=["message", "tool"]) == 0
    assert memory.store.index.count("ana", memory_type="fact") == 1  # facts stay
    assert [m.content for m in TiermemChatMessageHistory(memory, "ana", "s2").messages] == ["other"]
    assert "Lisbon" not in memory.get_context("weather in Lisbon", "ana", session_id="s1").text()


def test_repeated_line_within_the_buffer_is_kept(memory: Memory) -> None:
    history = TiermemChatMessageHistory(memory, "ana", "s1")
    history.add_messages([HumanMessage("yes"), AIMessage("Sure?"), HumanMessage("yes")])
    assert [m.content for m in history.messages] == ["yes", "Sure?", "yes"]


async def test_async_twins(memory: Memory) -> None:
    history = TiermemChatMessageHistory(memory, "ana", "s1")
    await history.aadd_messages(CONVERSATION)
    assert await history.aget_messages() == CONVERSATION
    await history.aclear()
    assert await history.aget_messages() == []


def test_bad_input_is_refused_with_typed_errors_and_nothing_added(memory: Memory) -> None:
    with pytest.raises(MissingUserError):
        TiermemChatMessageHistory(memory, "", "s1")
    with pytest.raises(MissingUserError):
        TiermemChatMessageHistory(memory, None, "s1")  # type: ignore[arg-type]
    with pytest.raises(InputError) as err:
        TiermemChatMessageHistory(memory, "ana", "  ")
    assert err.value.field == "session_id"
    with pytest.raises(InvalidTypeError):
        TiermemChatMessageHistory(memory, "ana", 7)  # type: ignore[arg-type]
    history = TiermemChatMessageHistory(memory, "ana", "s1")
    with pytest.raises(InvalidTypeError) as err:
        history.add_messages([HumanMessage("ok"), {"role": "user", "content": "x"}])  # type: ignore[list-item]
    assert err.value.field == "messages[1]"
    with pytest.raises(InvalidTypeError):
        history.add_messages(HumanMessage("not in a list"))  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        history.add_messages([HumanMessage("bytes", additional_kwargs={"blob": b"\x00"})])
    assert history.messages == []


def test_repeated_line_survives_a_restart(tmp_path) -> None:
    from embedders import HashEmbedder

    path = str(tmp_path / "m.db")
    said = [HumanMessage("yes"), AIMessage("Sure?"), HumanMessage("yes")]
    with Memory(path, embedder=HashEmbedder(32)) as first:
        TiermemChatMessageHistory(first, "ana", "s").add_messages(said)
    with Memory(path, embedder=HashEmbedder(32)) as second:
        assert [m.content for m in TiermemChatMessageHistory(second, "ana", "s").messages] == [
            "yes",
            "Sure?",
            "yes",
        ]
