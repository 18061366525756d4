"""A long message in a context: the passages that answer, marked as an excerpt of their
message; standing instructions offered first; both go when their message goes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from embedders import HashEmbedder
from tiermem import Memory
from tiermem.config.model import TiermemConfig

FILLER = [
    f"Section {i}. The quarterly report covers revenue in region {i} and the churn of plan {i}."
    for i in range(60)
]
ANSWER = "The deadline for finishing the authentication module is April 15 at noon."
DOCUMENT = "\n\n".join([*FILLER[:30], ANSWER, *FILLER[30:]])


def memory_at(path: Path, **planner: object) -> Memory:
    config = TiermemConfig.model_validate({"memory": {"planner": planner}} if planner else {})
    return Memory(str(path / "memory.db"), config=config, embedder=HashEmbedder(64))


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    m = memory_at(tmp_path)
    yield m
    m.close()


def test_a_long_message_is_shown_by_the_passage_that_answers(memory: Memory) -> None:
    memory.add("user", "Here is the project plan.", user_id="u", session_id="s1")
    memory.add("assistant", DOCUMENT, user_id="u", session_id="s1", message_id="plan-1")
    memory.flush()
    context = memory.get_context(
        "What deadline did I set for finishing the authentication module?",
        user_id="u",
        session_id="s2",
        max_tokens=400,
    )
    text = context.text()
    assert ANSWER in text
    assert "assistant (excerpt of message plan-1):" in text
    assert len(text) < len(DOCUMENT) / 3  # not the whole message
    (item,) = [i for i in context.items if ANSWER in i.content]
    assert item.message_id == "plan-1" and item.span is not None
    start, end = item.span
    assert DOCUMENT[start:end] == item.content
    assert text.count(ANSWER) == 1  # never the same text twice


def test_passages_of_a_message_in_the_recent_window_are_not_repeated(memory: Memory) -> None:
    memory.add("assistant", DOCUMENT, user_id="u", session_id="s1", message_id="plan-1")
    memory.flush()
    context = memory.get_context(
        "the authentication module deadline", user_id="u", session_id="s1", max_tokens=8000
    )
    assert [i.section for i in context.items if ANSWER in i.content] == ["recent"]


def test_adjacent_passages_merge_and_a_gap_is_marked(memory: Memory) -> None:
    memory.add("assistant", DOCUMENT, user_id="u", session_id="s1", message_id="plan-1")
    memory.flush()
    context = memory.get_context(
        "revenue region churn plan quarterly report authentication deadline",
        user_id="u",
        session_id="s2",
        max_tokens=3000,
    )
    lines = context.messages[0]["content"].splitlines()
    assert lines.count("assistant (excerpt of message plan-1):") == 1
    spans = sorted(i.span for i in context.items if i.message_id == "plan-1" and i.span)
    assert len(spans) > 1
    gaps = sum(1 for (_, b), (c, _) in itertools.pairwise(spans) if c > b + 2)
    assert lines.count("[...]") <= gaps


def test_forgetting_the_message_takes_its_passages(memory: Memory) -> None:
    memory.add("assistant", DOCUMENT, user_id="u", session_id="s1", message_id="plan-1")
    memory.flush()
    assert any(r.memory_type == "passage" for r in memory.list_memories(user_id="u", limit=500))
    memory.forget_messages("u", ["plan-1"])
    assert memory.list_memories(user_id="u", limit=500) == []
    context = memory.get_context(ANSWER, user_id="u", session_id="s2", max_tokens=2000)
    assert ANSWER not in context.text()


def test_a_standing_instruction_reaches_a_context_its_question_applies_to(memory: Memory) -> None:
    rule = "Always format code snippets with syntax highlighting when I ask about implementation."
    memory.add("user", rule, user_id="u", session_id="s1", message_id="rule")
    for i in range(40):
        memory.add(
            "user", f"Weather note {i}: rain in town {i} today.", user_id="u", session_id="s1"
        )
    memory.flush()
    (stated,) = [
        r for r in memory.list_memories(user_id="u", limit=500) if r.memory_type == "preference"
    ]
    assert stated.content == rule and stated.metadata["excerpt_of"] == "rule"
    context = memory.get_context(
        "Show me code for the implementation of a login form",
        user_id="u",
        session_id="s2",
        max_tokens=200,
    )
    assert rule in context.text()
    memory.forget_messages("u", ["rule"])
    assert not [
        r for r in memory.list_memories(user_id="u", limit=500) if r.memory_type == "preference"
    ]


def test_passages_can_be_turned_off(tmp_path: Path) -> None:
    config = TiermemConfig.model_validate({"memory": {"passages": {"enabled": False}}})
    m = Memory(str(tmp_path / "off.db"), config=config, embedder=HashEmbedder(64))
    m.add("assistant", DOCUMENT, user_id="u", session_id="s1")
    m.flush()
    assert {r.memory_type for r in m.list_memories(user_id="u", limit=500)} == {"message"}
    m.close()


def test_a_question_that_asks_for_a_summary_gets_the_session_summaries(memory: Memory) -> None:
    summary = "Session on the budget app: login done, charts next, deadline April 15."
    memory.remember(summary, user_id="u", memory_type="summary", session_id="s1")
    for i in range(40):
        memory.add("user", f"My budget app note {i}: fixed bug {i}.", user_id="u", session_id="s1")
    memory.flush()
    asked = memory.get_context(
        "Can you summarize how my budget app has progressed?",
        user_id="u",
        session_id="s2",
        max_tokens=120,
    )
    assert summary in asked.text()
    plain = memory.get_context("Which bug did I fix?", user_id="u", session_id="s2", max_tokens=120)
    assert summary not in plain.text()
