"""Summarizers: the LLM summarizer over HTTP (fake server) and the offline extractive one."""

from __future__ import annotations

from typing import Any

import pytest

from fakeserver import FakeServer
from tiermem.errors import (
    ConfigError,
    InvalidSizeError,
    InvalidTypeError,
    ProviderResponseError,
)
from tiermem.llm import OpenAIModel
from tiermem.summaries.summarize import (
    DEFAULT_TEMPLATE,
    ExtractiveSummarizer,
    MemorySummarizer,
    Summarizer,
    render_conversation,
)

SEED_PREFIX = (
    "Summarize the following conversation concisely, focusing on key facts and important "
    "information:\n\n"
)
CHAT = [
    {"role": "user", "content": "Hello, my name is Alice."},
    {"role": "assistant", "content": "Hello Alice! How can I help you today?"},
]


class WordCounter:
    def count(self, text: str) -> int:
        return len(text.split())


def llm(server: FakeServer, **kw: Any) -> OpenAIModel:
    return OpenAIModel("gpt-3.5-turbo", base_url=server.openai_url, api_key="k", backoff=0.01, **kw)


# -- MemorySummarizer -------------------------------------------------------------------


def test_memory_summarizer_sends_the_seed_prompt(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "  Alice introduced herself.  "
    summarizer = MemorySummarizer(model=llm(fake_server))
    assert summarizer.summarize(CHAT) == "Alice introduced herself."
    sent = fake_server.requests[0].json["messages"]
    assert sent == [
        {
            "role": "user",
            "content": SEED_PREFIX
            + "User: Hello, my name is Alice.\nAssistant: Hello Alice! How can I help you today?\n",
        }
    ]


def test_memory_summarizer_merges_previous_summary(fake_server: FakeServer) -> None:
    summarizer = MemorySummarizer(model=llm(fake_server))
    summarizer.summarize(CHAT, previous_summary="Bob likes tea.")
    prompt = fake_server.requests[0].json["messages"][0]["content"]
    assert "Bob likes tea." in prompt and "User: Hello, my name is Alice." in prompt
    assert prompt.index("Bob likes tea.") < prompt.index("Alice")


def test_memory_summarizer_custom_templates_and_options(fake_server: FakeServer) -> None:
    summarizer = MemorySummarizer(
        llm(fake_server),
        template="TL;DR {{json}}:\n{conversation}",
        merge_template="{summary} + {conversation}",
        temperature=0,
    )
    summarizer.summarize(CHAT)
    body = fake_server.requests[0].json
    assert body["messages"][0]["content"].startswith("TL;DR {json}:\nUser: Hello")
    assert body["temperature"] == 0


def test_memory_summarizer_empty_batch_makes_no_call(fake_server: FakeServer) -> None:
    summarizer = MemorySummarizer(llm(fake_server))
    assert summarizer.summarize([]) == ""
    assert summarizer.summarize([], previous_summary="kept") == "kept"
    assert fake_server.requests == []


def test_memory_summarizer_accepts_generate_only_models() -> None:
    class Seed:
        def generate(self, prompt: str) -> str:
            return f"{len(prompt)} chars"

    summarizer = MemorySummarizer(model=Seed())
    assert summarizer.summarize(CHAT) == f"{len(SEED_PREFIX + render_conversation(CHAT))} chars"
    assert isinstance(summarizer, Summarizer)


async def test_memory_summarizer_async(fake_server: FakeServer) -> None:
    summarizer = MemorySummarizer(llm(fake_server))
    assert (await summarizer.asummarize(CHAT)).startswith("reply: ")

    class Seed:
        def generate(self, prompt: str) -> str:
            return "threaded"

    assert await MemorySummarizer(Seed()).asummarize(CHAT) == "threaded"


def test_memory_summarizer_provider_error_propagates(fake_server: FakeServer) -> None:
    fake_server.fail_next(500, 500)
    with pytest.raises(ProviderResponseError):
        MemorySummarizer(llm(fake_server, max_retries=1)).summarize(CHAT)


def test_memory_summarizer_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    summarizer = MemorySummarizer("openai/gpt-4o-mini")
    assert summarizer.model.model_id == "openai/gpt-4o-mini"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"template": "no placeholder"}, ConfigError),
        ({"template": "{conversation} {oops}"}, ConfigError),
        ({"template": "{conversation} {"}, ConfigError),
        ({"merge_template": "{conversation} only"}, ConfigError),
        ({"template": 5}, InvalidTypeError),
    ],
)
def test_memory_summarizer_bad_templates(kw: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        MemorySummarizer(OpenAIModel("m", api_key="k"), **kw)


def test_memory_summarizer_bad_model() -> None:
    with pytest.raises(InvalidTypeError, match="model"):
        MemorySummarizer(model=42)
    with pytest.raises(ConfigError):
        MemorySummarizer(model="no-provider")


def test_message_objects_and_names_are_rendered() -> None:
    class Msg:
        def __init__(self, role: str, content: Any, name: str | None = None) -> None:
            self.role, self.content, self.name = role, content, name

    text = render_conversation(
        [Msg("user", "hi", name="Caroline"), Msg("assistant", [{"type": "text", "text": "yo"}])]
    )
    assert text == "Caroline: hi\nAssistant: yo\n"
    for bad in ("a string", [42], [{"content": "no role"}]):
        with pytest.raises(InvalidTypeError):
            render_conversation(bad)  # type: ignore[arg-type]


def test_default_template_is_the_seed_prompt() -> None:
    assert DEFAULT_TEMPLATE.format(conversation="") == SEED_PREFIX


# -- ExtractiveSummarizer ---------------------------------------------------------------

TALK = [
    {"role": "user", "content": "Hey! How are you?"},
    {"role": "assistant", "content": "Good, thanks! Wow."},
    {
        "role": "user",
        "content": "I moved to Lisbon on 3 March 2023 with my sister Maria. It was a lot.",
    },
    {"role": "assistant", "content": "That sounds great. What do you do for fun?"},
    {"role": "user", "content": "I love rock climbing and I hate running. Cool, right?"},
    {"role": "assistant", "content": "Nice!"},
]


def test_extractive_keeps_facts_and_drops_chatter() -> None:
    summary = ExtractiveSummarizer(max_tokens=30, token_counter=WordCounter()).summarize(TALK)
    assert "Lisbon" in summary and "3 March 2023" in summary
    assert "I love rock climbing" in summary
    assert "Hey!" not in summary and "Nice!" not in summary
    assert WordCounter().count(summary) <= 30


def test_extractive_is_deterministic_and_ordered() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=40, token_counter=WordCounter())
    first = summarizer.summarize(TALK)
    assert all(summarizer.summarize(TALK) == first for _ in range(3))
    assert first.index("Lisbon") < first.index("rock climbing")
    assert first.splitlines()[0].startswith("User: ")


@pytest.mark.parametrize("limit", [1, 3, 7, 12, 25, 60, 500])
def test_extractive_respects_token_bound(limit: int) -> None:
    summarizer = ExtractiveSummarizer(max_tokens=limit, token_counter=WordCounter())
    summary = summarizer.summarize(TALK * 5)
    assert WordCounter().count(summary) <= limit
    assert summary or limit < 3  # something survives unless even "User: …" cannot fit


def test_extractive_respects_char_bound() -> None:
    summary = ExtractiveSummarizer(max_tokens=None, max_chars=80).summarize(TALK)
    assert 0 < len(summary) <= 80


def test_extractive_default_counter_counts_tokens() -> None:
    summary = ExtractiveSummarizer(max_tokens=20).summarize(TALK)
    assert "Lisbon" in summary


def test_extractive_merges_previous_summary_within_bound() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=40, token_counter=WordCounter())
    first = summarizer.summarize(TALK[:3])
    merged = summarizer.summarize(TALK[3:], previous_summary=first)
    assert "Lisbon" in merged and "rock climbing" in merged
    assert WordCounter().count(merged) <= 40
    # repeated merges stay bounded and do not duplicate sentences
    again = summarizer.summarize(TALK[3:], previous_summary=merged)
    assert again.count("rock climbing") == 1
    assert WordCounter().count(again) <= 40


def test_extractive_merges_a_foreign_summary() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=60, token_counter=WordCounter())
    merged = summarizer.summarize(TALK[4:5], previous_summary="Alice works at Acme since 2019.")
    assert "Acme" in merged and "rock climbing" in merged


def test_extractive_edge_cases() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=10, token_counter=WordCounter())
    assert summarizer.summarize([]) == ""
    assert summarizer.summarize([], previous_summary="Kept: Bob is 42 years old.") != ""
    assert summarizer.summarize([{"role": "user", "content": ""}]) == ""
    assert summarizer.summarize([{"role": "user", "content": None}]) == ""
    huge = [{"role": "user", "content": "word " * 10_000}]
    assert WordCounter().count(summarizer.summarize(huge)) <= 10
    unicode = [{"role": "user", "content": "Ich liebe München im Mai 2024. 東京に住んでいます。"}]
    assert "München" in ExtractiveSummarizer(max_tokens=50).summarize(unicode)


@pytest.mark.parametrize(
    "kw",
    [
        {"max_tokens": 0},
        {"max_tokens": -5},
        {"max_tokens": 2.5},
        {"max_tokens": True},
        {"max_tokens": None, "max_chars": None},
        {"max_tokens": None, "max_chars": 0},
    ],
)
def test_extractive_bad_bounds(kw: dict[str, Any]) -> None:
    with pytest.raises(InvalidSizeError):
        ExtractiveSummarizer(**kw)


def test_extractive_bad_input() -> None:
    summarizer = ExtractiveSummarizer()
    with pytest.raises(InvalidTypeError):
        summarizer.summarize("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        summarizer.summarize(TALK, previous_summary=5)  # type: ignore[arg-type]


async def test_extractive_async_matches_sync() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=30, token_counter=WordCounter())
    assert await summarizer.asummarize(TALK) == summarizer.summarize(TALK)
    assert isinstance(summarizer, Summarizer)
