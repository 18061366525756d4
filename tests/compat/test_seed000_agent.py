"""Seed 000 (MUXI): "Integration with Agents", run against a local OpenAI-protocol server.

The body is the seed's code with only the import lines changed; ``OpenAIModel`` reads
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the official SDK does, so the environment
points it at the fake server.
"""

from __future__ import annotations

import pytest

from fakeserver import FakeServer


def test_agent_uses_and_updates_the_buffer(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_server.api_key = "sk-test"

    from tiermem import BufferMemory
    from tiermem.agent import Agent
    from tiermem.llm import OpenAIModel

    # Create buffer
    buffer = BufferMemory(buffer_size=10)

    # Create agent with buffer
    agent = Agent(
        name="assistant",
        model=OpenAIModel("gpt-4"),
        system_message="You are a helpful assistant.",
        buffer_memory=buffer,
    )

    # Each chat interaction automatically uses and updates the buffer
    agent.chat("Hello, my name is Charlie.")
    agent.chat("What's my name?")  # Will include "Charlie" in response

    first, second = (r.json for r in fake_server.requests)
    assert first["model"] == "gpt-4"
    assert first["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, my name is Charlie."},
    ]
    # The second request carries the first exchange, so the model can answer "Charlie".
    assert second["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, my name is Charlie."},
        {"role": "assistant", "content": "reply: Hello, my name is Charlie."},
        {"role": "user", "content": "What's my name?"},
    ]
    assert [m.role for m in buffer.get_messages()] == ["user", "assistant"] * 2
    assert buffer.get_messages()[-1].content == "reply: What's my name?"
