"""Seed 000 (MUXI): the summarizer examples, with only the import lines changed.

The LLM behind ``OpenAIModel("gpt-3.5-turbo")`` is the local fake OpenAI server,
reached through ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` as with the official SDK.

The seed summarizes inside ``add_message``; tiermem summarizes in the background (an
append never waits on the LLM), and reading ``buffer.summary`` waits briefly for the
batches in progress while the model answers (docs/compat.md), so the example runs as
the seed wrote it.
"""

from __future__ import annotations

import datetime

import pytest

from fakeserver import FakeServer

SEED_PROMPT = (
    "Summarize the following conversation concisely, focusing on key facts and important "
    "information:\n\n"
)


@pytest.fixture
def openai_env(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_url)
    fake_server.api_key = "sk-test"
    fake_server.chat_reply = lambda body: "The user sent messages 0 to 4."
    return fake_server


def test_automatic_summarization(
    openai_env: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiermem.buffer import BufferMemory
    from tiermem.llm import OpenAIModel
    from tiermem.summaries import MemorySummarizer

    # Create summarizer with a model
    summarizer = MemorySummarizer(model=OpenAIModel("gpt-3.5-turbo"))

    # Create buffer with summarizer
    buffer = BufferMemory(buffer_size=5, summarizer=summarizer)

    # When buffer overflows, oldest messages are summarized
    for i in range(10):
        buffer.add_message("user", f"Message {i}")

    print(buffer.summary)  # Contains summary of oldest messages

    assert capsys.readouterr().out == "The user sent messages 0 to 4.\n"
    request = openai_env.requests[0]
    assert request.json["model"] == "gpt-3.5-turbo"
    assert request.json["messages"] == [
        {
            "role": "user",
            "content": SEED_PROMPT + "".join(f"User: Message {i}\n" for i in range(5)),
        }
    ]
    assert [m["content"] for m in buffer.get_messages()] == [f"Message {i}" for i in range(5, 10)]
    assert buffer.get_formatted_messages()[0] == {
        "role": "system",
        "content": "Previous conversation summary: The user sent messages 0 to 4.",
    }


def test_summarize_with_seed_message_dicts(openai_env: FakeServer) -> None:
    from tiermem.llm import OpenAIModel
    from tiermem.summaries import MemorySummarizer

    # The seed's add_message hands the summarizer its stored dicts (with timestamps)
    to_summarize = [
        {
            "role": "user",
            "content": "Hello, my name is Alice.",
            "timestamp": datetime.datetime.now().isoformat(),
        },
        {
            "role": "assistant",
            "content": "Hello Alice! How can I help you today?",
            "timestamp": datetime.datetime.now().isoformat(),
            "metadata": {"user_id": "user1"},
        },
    ]
    summarizer = MemorySummarizer(model=OpenAIModel("gpt-3.5-turbo"))
    summary = summarizer.summarize(to_summarize)

    assert summary == "The user sent messages 0 to 4."
    prompt = openai_env.requests[0].json["messages"][0]["content"]
    assert prompt == (
        SEED_PROMPT
        + "User: Hello, my name is Alice.\nAssistant: Hello Alice! How can I help you today?\n"
    )


def test_seed_model_generate(openai_env: FakeServer) -> None:
    from tiermem.llm import OpenAIModel

    # The seed's summarizer calls model.generate(prompt)
    response = OpenAIModel("gpt-3.5-turbo").generate("Summarize: hi")
    assert response == "The user sent messages 0 to 4."
