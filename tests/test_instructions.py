"""Standing instructions and preferences found in a user's words, without a model."""

from __future__ import annotations

import pytest

from tiermem.work.instructions import standing


def said(text: str) -> list[str]:
    return [text[a:b] for a, b in standing(text)]


@pytest.mark.parametrize(
    "sentence",
    [
        "Always format all code snippets with syntax highlighting when I ask about implementation details.",
        "Always answer in Spanish.",
        "Never use emojis in replies.",
        "Please always include version numbers for libraries.",
        "From now on, keep answers short.",
        "Whenever I ask about dates, use the ISO format.",
        "I prefer PostgreSQL over MySQL for new projects.",
        "I'm trying to keep my app small, so I prefer minimal dependencies, can you help me?",
        "I'd rather see the tests first.",
    ],
)
def test_instructions_and_preferences_are_found(sentence: str) -> None:
    assert said(f"Thanks for that. {sentence} What next?") == [sentence]


@pytest.mark.parametrize(
    "sentence",
    [
        "Always happy to help!",
        "Never saw this coming.",
        "Always been interested in other cultures.",
        "Always staying positive.",
        "Whenever you need help, just let me know.",
        "Whenever I hear this song, I think of home.",
        "When I turned ten, dad signed me up for a league.",
        "Always use tabs?",
        "I like hiking on weekends.",
    ],
)
def test_sentences_that_only_open_like_one_are_not(sentence: str) -> None:
    assert said(sentence) == []


def test_spans_point_into_the_text() -> None:
    text = "Some context here.\n\nAlways include status codes when I ask about errors. Thanks!"
    ((start, end),) = standing(text)
    assert text[start:end] == "Always include status codes when I ask about errors."
