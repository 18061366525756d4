"""Seed 002 (tinygent BufferSummaryChatMemory): the example, with only the imports changed.

``build_llm('openai:gpt-4o-mini')`` talks to the local fake OpenAI server (through
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``). tinygent's message classes are tiermem
message factories (the mapping is in docs/summarization.md).
"""

from __future__ import annotations

import pytest

from fakeserver import FakeServer

SUMMARY = (
    "The human initiated a conversation with the assistant, requesting assistance in "
    "planning their weekend."
)


@pytest.fixture
def openai_env(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_url)
    fake_server.api_key = "sk-test"
    fake_server.chat_reply = lambda body: SUMMARY
    return fake_server


def test_seed002_example(openai_env: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    from tiermem.llm import get_llm as build_llm
    from tiermem.summaries import BufferSummaryChatMemory
    from tiermem.summaries import chat_message as TinyChatMessage
    from tiermem.summaries import human_message as TinyHumanMessage
    from tiermem.summaries import plan_message as TinyPlanMessage

    memory = BufferSummaryChatMemory(
        build_llm("openai:gpt-4o-mini"),
        max_token_limit=30,
        return_messages=True,
    )

    # First exchange
    memory.save_context(TinyHumanMessage(content="Hello, assistant."))
    memory.save_context(TinyChatMessage(content="Hi there! How can I help you today?"))

    # Second exchange
    memory.save_context(TinyHumanMessage(content="Can you make a plan for my weekend?"))
    memory.save_context(TinyPlanMessage(content="Sure! 1. Go hiking. 2. Watch a movie. 3. Relax."))

    print("Full memory:", memory.load_variables())

    # The seed's output: a summary message, then the plan message that still fits.
    chat = memory.load_variables()["summarized_chat"]
    assert isinstance(chat, list) and len(chat) == 2
    summary, plan = chat
    assert summary.role == "system" and summary.metadata == {"type": "summary"}
    assert summary.content == SUMMARY
    assert plan.role == "assistant" and plan.metadata == {"type": "plan"}
    assert plan.content == "Sure! 1. Go hiking. 2. Watch a movie. 3. Relax."
    out = capsys.readouterr().out
    assert out.startswith("Full memory: {'summarized_chat': [Message(role='system'")
    # The three pruned messages reached the LLM; reading twice changed nothing (the
    # package's bug wrote the summary into the history on every load_variables).
    prompts = [r.json["messages"][0]["content"] for r in openai_env.requests]
    assert "User: Hello, assistant." in prompts[0]
    assert any("Can you make a plan for my weekend?" in p for p in prompts)
    assert memory.load_variables() == memory.load_variables()
    assert len(memory.buffer) == 1
