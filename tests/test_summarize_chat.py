"""BufferSummaryChatMemory: seed 002's API over BufferMemory and the summary pipeline."""

from __future__ import annotations

import pytest

from fakeserver import FakeServer
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.llm import OpenAIModel
from tiermem.messages import Message
from tiermem.summaries.chat import (
    BufferSummaryChatMemory,
    chat_message,
    human_message,
    plan_message,
    reasoning_message,
    summary_message,
    system_message,
)
from tiermem.summaries.worker import SummaryPolicy


def llm(server: FakeServer) -> OpenAIModel:
    return OpenAIModel("m", base_url=server.openai_url, api_key="k", max_retries=0)


def talk(memory: BufferSummaryChatMemory, n: int) -> None:
    for i in range(n):
        memory.save_context(human_message(f"My favourite number is {i} and I live in Oslo."))
        memory.save_context(chat_message(f"Noted: {i}."))


def test_message_factories_map_to_roles() -> None:
    assert (human_message("a").role, human_message("a").metadata) == ("user", {})
    assert chat_message("a").role == "assistant"
    assert plan_message("a").metadata == {"type": "plan"}
    assert reasoning_message("a").metadata == {"type": "reasoning"}
    assert system_message("a").role == "system"
    assert summary_message("a").metadata == {"type": "summary"}
    assert plan_message("a", metadata={"k": 1}).metadata == {"k": 1, "type": "plan"}


def test_window_holds_the_token_limit_and_summary_comes_first(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "S"
    memory = BufferSummaryChatMemory(llm(fake_server), max_token_limit=60, return_messages=True)
    talk(memory, 10)
    assert memory.buffer.tokens <= 60
    chat = memory.load_variables()["summarized_chat"]
    assert isinstance(chat, list)
    assert chat[0].role == "system" and chat[0].content == "S"
    assert [m.content for m in chat[1:]] == [m.content for m in memory.buffer.messages]
    assert memory.buffer.summarization is not None
    stats = memory.buffer.summarization.stats
    assert stats.messages == memory.buffer.evicted_count == 20 - len(memory.buffer)


def test_string_output(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "they talked"
    memory = BufferSummaryChatMemory(llm(fake_server), max_token_limit=20)
    talk(memory, 3)
    text = memory.load_variables()["summarized_chat"]
    assert isinstance(text, str)
    assert text.startswith("System: they talked\n")
    assert text.endswith("Assistant: Noted: 2.")


def test_load_variables_does_not_modify_history(fake_server: FakeServer) -> None:
    memory = BufferSummaryChatMemory(llm(fake_server), max_token_limit=30, return_messages=True)
    talk(memory, 3)
    before = memory.buffer.messages
    first = memory.load_variables()
    calls = len(fake_server.requests)
    for _ in range(3):
        assert memory.load_variables() == first
    assert memory.buffer.messages == before
    assert len(fake_server.requests) == calls  # no new LLM call without new evictions


def test_without_llm_uses_the_extractive_summarizer() -> None:
    memory = BufferSummaryChatMemory(max_token_limit=25, return_messages=True)
    talk(memory, 4)
    chat = memory.load_variables()["summarized_chat"]
    assert isinstance(chat, list)
    assert "Oslo" in chat[0].content


def test_failing_llm_falls_back_and_loses_nothing(fake_server: FakeServer) -> None:
    fake_server.fail_next(*[500] * 50)
    memory = BufferSummaryChatMemory(
        llm(fake_server),
        max_token_limit=25,
        return_messages=True,
        summary_policy=SummaryPolicy(batch_size=2, max_failures=2, retry_backoff=0.0),
    )
    talk(memory, 4)
    memory.prune()
    summary = memory.summary or ""
    assert "Oslo" in summary
    assert memory.buffer.summarization is not None
    assert memory.buffer.summarization.stats.fallbacks >= 1


def test_clear_resets_everything(fake_server: FakeServer) -> None:
    memory = BufferSummaryChatMemory(llm(fake_server), max_token_limit=20, return_messages=True)
    talk(memory, 3)
    memory.prune()
    memory.clear()
    assert memory.load_variables() == {"summarized_chat": []}
    assert memory.summary is None


async def test_async_twins(fake_server: FakeServer) -> None:
    memory = BufferSummaryChatMemory(llm(fake_server), max_token_limit=20, return_messages=True)
    for i in range(4):
        await memory.asave_context(human_message(f"I was born in {1990 + i}."))
    await memory.aprune()
    chat = (await memory.aload_variables())["summarized_chat"]
    assert isinstance(chat, list) and chat[0].metadata == {"type": "summary"}


def test_bad_input() -> None:
    memory = BufferSummaryChatMemory(max_token_limit=20)
    with pytest.raises(InvalidTypeError, match="message"):
        memory.save_context({"role": "user", "content": "dict"})  # type: ignore[arg-type]
    with pytest.raises(InvalidSizeError):
        BufferSummaryChatMemory(max_token_limit=0)
    assert len(memory.buffer) == 0
    memory.save_context(Message("user", "fine"))
    assert "messages=1" in repr(memory)
