"""The patterns with the real MiniLM: recall by meaning where the seed's substring match fails."""

from __future__ import annotations

import pytest

from embedders import minilm
from tiermem.messages import Message
from tiermem.patterns import EpisodicMemory, HierarchicalMemory, RAGMemory

pytestmark = pytest.mark.slow

EPISODES = [
    [
        "I need flights to Tokyo for the cherry blossom season.",
        "Found three flights to Narita in April.",
    ],
    ["My laptop will not boot after the update.", "Try holding the power button for 30 seconds."],
    ["Can you suggest a vegetarian lasagna recipe?", "Use spinach, ricotta and mushrooms."],
]


def _episodic() -> EpisodicMemory:
    memory = EpisodicMemory(embedder=minilm())
    for episode in EPISODES:
        for i, text in enumerate(episode):
            memory.add_message(Message("user" if i == 0 else "assistant", text))
        memory.start_new_episode()
    return memory


@pytest.mark.parametrize(
    ("query", "expected"),
    [("our trip to Japan", 0), ("computer won't start", 1), ("what should I cook for dinner", 2)],
)
def test_recall_episode_by_meaning(query: str, expected: int) -> None:
    memory = _episodic()
    assert memory.recall_episode(query) is memory.episodes[expected]
    # the seed's substring search finds nothing for these queries
    assert not any(query.lower() in t.lower() for e in EPISODES for t in e)


def test_unrelated_query_recalls_nothing() -> None:
    assert _episodic().recall_episode("quarterly tax filing deadline for corporations") is None


async def test_rag_retrieves_paraphrases() -> None:
    rag = RAGMemory(minilm())
    facts = [
        "My daughter is allergic to peanuts.",
        "The office wifi password is on the fridge.",
        "We are moving to Lyon in September.",
        "I prefer window seats on long flights.",
    ]
    for fact in facts:
        await rag.add_with_embedding(Message("user", fact))
    assert [m.content for m in await rag.retrieve_relevant("food intolerance of my kid", k=1)] == [
        facts[0]
    ]
    assert [m.content for m in await rag.retrieve_relevant("relocation plans", k=1)] == [facts[2]]


def test_hierarchical_recalls_old_messages_by_meaning() -> None:
    memory = HierarchicalMemory(working_size=4, embedder=minilm())
    memory.add_message_with_importance(Message("user", "My car is a blue 2012 Volvo estate."), 0.3)
    for text in [
        "Nice weather today.",
        "Let's plan the week.",
        "Monday is busy.",
        "Tuesday is free.",
    ]:
        memory.add_message_with_importance(Message("user", text), 0.1)
    context = memory.get_context_for_llm(query="what vehicle do I drive?", k=1)
    assert "Volvo" in context[0]["content"]
