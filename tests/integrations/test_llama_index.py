"""TiermemChatMemory and TiermemMemoryBlock against the real llama-index-core."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.memory import BaseMemory
from llama_index.core.memory import Memory as LlamaMemory

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, MissingUserError
from tiermem.integrations.llama_index import TiermemChatMemory, TiermemMemoryBlock
from tiermem.memory import Memory

CHAT = [
    ChatMessage(role="system", content="You help with recipes."),
    ChatMessage(
        role="user", blocks=[TextBlock(text="What is in this?"), ImageBlock(image=b"\x89PNG fake")]
    ),
    ChatMessage(
        role="assistant",
        content="",
        additional_kwargs={
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "pesto"}'},
                }
            ]
        },
    ),
    ChatMessage(
        role="tool",
        content="basil, pine nuts",
        additional_kwargs={"tool_call_id": "call_1", "name": "lookup"},
    ),
    ChatMessage(role="assistant", content="It is pesto: basil and pine nuts."),
]


def test_chat_memory_keeps_messages_losslessly(memory: Memory) -> None:
    chat = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s1")
    assert isinstance(chat, BaseMemory)
    for message in CHAT:
        chat.put(message)
    assert chat.get_all() == CHAT
    again = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s1")
    assert again.get_all() == CHAT
    context = memory.get_context("pesto", "ana", session_id="s1")
    call = next(m for m in context.messages if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "lookup"
    assert any(m["role"] == "tool" and m.get("tool_call_id") == "call_1" for m in context.messages)


def test_get_keeps_the_newest_within_the_token_limit_and_adds_recall(memory: Memory) -> None:
    memory.remember("Ana is allergic to peanuts.", "ana", "preference")
    history = [
        ChatMessage(role="user", content="one two three four five six"),
        ChatMessage(role="assistant", content="seven eight nine"),
        ChatMessage(role="user", content="ten eleven"),
        ChatMessage(role="assistant", content="twelve"),
    ]
    chat = TiermemChatMemory.from_defaults(
        memory=memory, user_id="ana", session_id="s1", token_limit=6, chat_history=history
    )
    # o200k: 6 + 3 + 2 + 1 tokens; the newest 6 start with an assistant message, dropped
    assert [m.content for m in chat.get()] == ["ten eleven", "twelve"]
    with_recall = chat.get(input="can I eat peanuts?")
    assert with_recall[0].role == MessageRole.SYSTEM and "peanuts" in (with_recall[0].content or "")
    assert [m.content for m in with_recall[1:]] == ["ten eleven", "twelve"]
    tiny = TiermemChatMemory.from_defaults(
        memory=memory, user_id="ana", session_id="s1", token_limit=1
    )
    assert [m.content for m in tiny.get()] == ["twelve"]
    tool_first = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="t")
    tool_first.put_messages(CHAT[2:4])  # a tool call and its result, nothing before
    assert [m.role for m in tool_first.get()] == [MessageRole.ASSISTANT, MessageRole.TOOL]


def test_set_and_reset(memory: Memory) -> None:
    chat = TiermemChatMemory.from_defaults(
        memory=memory, user_id="ana", session_id="s1", chat_history=CHAT
    )
    chat.set([ChatMessage(role="user", content="fresh start")])
    assert [m.content for m in chat.get_all()] == ["fresh start"]
    chat.reset()
    assert chat.get_all() == []
    memory.flush()
    assert memory.store.index.count("ana", session_id="s1") == 0


async def test_async_twins(memory: Memory) -> None:
    chat = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s1")
    await chat.aput_messages(CHAT)
    assert await chat.aget_all() == CHAT
    await chat.aset(CHAT[:1])
    assert await chat.aget() == CHAT[:1]
    await chat.areset()
    assert await chat.aget_all() == []


def test_users_are_isolated(memory: Memory) -> None:
    ana = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s")
    bob = TiermemChatMemory.from_defaults(memory=memory, user_id="bob", session_id="s")
    ana.put(ChatMessage(role="user", content="ana's passport number is X123"))
    assert bob.get_all() == [] and bob.get() == []
    assert all("X123" not in (m.content or "") for m in bob.get(input="passport number X123"))
    bob.reset()
    assert len(ana.get_all()) == 1


async def test_memory_block_recalls_into_llama_index_memory_and_keeps_what_it_flushes(
    memory: Memory,
) -> None:
    memory.remember("Ana's bike lock code is 8080.", "ana", "fact")
    memory.remember("Bob's bike lock code is 1111.", "bob", "fact")
    block = TiermemMemoryBlock(memory=memory, user_id="ana", session_id="li")
    llama_memory = LlamaMemory.from_defaults(
        session_id="li",
        token_limit=60,
        token_flush_size=20,
        chat_history_token_ratio=0.5,
        memory_blocks=[block],
        tokenizer_fn=lambda text: text.split(),
    )
    for i in range(8):
        await llama_memory.aput(
            ChatMessage(role="user", content=f"filler message number {i} about gardening")
        )
    await llama_memory.aput(ChatMessage(role="user", content="what is my bike lock code?"))
    messages = await llama_memory.aget()
    system = messages[0]
    assert system.role == MessageRole.SYSTEM
    assert "8080" in (system.content or "") and "1111" not in (system.content or "")
    memory.flush()
    flushed = [r.content for r in memory.store.index.list("ana", session_id="li")]
    assert any("filler message number 0" in c for c in flushed)  # what left the queue is kept
    assert memory.store.index.count("bob", session_id="li") == 0


def test_bad_input_gets_typed_errors(memory: Memory) -> None:
    with pytest.raises(MissingUserError):
        TiermemChatMemory.from_defaults(memory=memory, user_id="", session_id="s")
    with pytest.raises(InputError):
        TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id=" ")
    with pytest.raises(InvalidSizeError):
        TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s", token_limit=0)
    with pytest.raises(InvalidTypeError):
        TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s", llm="x")
    with pytest.raises(MissingUserError):
        TiermemMemoryBlock(memory=memory, user_id=None)
    with pytest.raises(InvalidSizeError):
        TiermemMemoryBlock(memory=memory, user_id="ana", max_tokens=-5)
    chat = TiermemChatMemory.from_defaults(memory=memory, user_id="ana", session_id="s")
    with pytest.raises(InvalidTypeError):
        chat.put({"role": "user", "content": "a dict"})  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError) as err:
        chat.put_messages([ChatMessage(role="user", content="ok"), "text"])  # type: ignore[list-item]
    assert err.value.field == "messages[1]"
    with pytest.raises(InvalidTypeError):
        chat.set("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        chat.get(input=5)  # type: ignore[arg-type]
    assert chat.get_all() == []
