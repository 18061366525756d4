"""Seed 004 (MARSYS memory): every code example, with only the import lines changed.

Examples that are class definitions in the seed (ConversationMemory, MemoryManager,
EpisodicMemory, SharedMemoryPool, HierarchicalMemory, CoordinatedMemorySystem,
RAGMemory, manage_token_limit, summarize_memory) are exercised through exactly the
attributes and calls the seed defines; examples that are user code run verbatim.
Semantic behaviour with the real MiniLM is in tests/test_patterns_semantic.py.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from embedders import HashEmbedder
from fakeserver import FakeServer


def _seed_memory_flow(memory: Any) -> None:
    from tiermem.messages import Message, generate_id

    # User input
    memory.add_message(
        Message(role="user", content="Analyze the quarterly sales data", message_id=generate_id())
    )

    # Agent response
    memory.add_message(
        Message(
            role="assistant",
            content="I'll analyze the quarterly sales data for you.",
            message_id=generate_id(),
        )
    )

    # Tool call
    memory.add_message(
        Message(
            role="assistant",
            content="",
            tool_calls=[
                {
                    "id": "call_123",
                    "type": "function",
                    "function": {"name": "analyze_sales", "arguments": '{"quarter": "Q4"}'},
                }
            ],
            message_id=generate_id(),
        )
    )

    # Tool result
    memory.add_message(
        Message(
            role="tool",
            content='{"total_sales": 1500000, "growth": "15%"}',
            tool_call_id="call_123",
            name="analyze_sales",
            message_id=generate_id(),
        )
    )


def test_conversation_memory_message_addition_and_retrieval() -> None:
    from tiermem.patterns import ConversationMemory

    memory = ConversationMemory()
    _seed_memory_flow(memory)

    # Get all messages
    all_messages = memory.get_messages()

    # Get recent context
    recent_context = memory.get_recent(10)

    # Get messages for LLM
    llm_messages = memory.to_llm_format()

    assert [m.role for m in all_messages] == ["user", "assistant", "assistant", "tool"]
    assert recent_context == all_messages
    assert memory.get_recent(0) == [] and memory.get_recent(-3) == []
    assert [m.content for m in memory.get_recent(1)] == [
        '{"total_sales": 1500000, "growth": "15%"}'
    ]
    assert llm_messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_123",
                "type": "function",
                "function": {"name": "analyze_sales", "arguments": '{"quarter": "Q4"}'},
            }
        ],
    }
    assert llm_messages[3] == {
        "role": "tool",
        "content": '{"total_sales": 1500000, "growth": "15%"}',
        "tool_call_id": "call_123",
    }
    # get_messages returns a copy: the memory is not changed through it
    all_messages.clear()
    assert len(memory.get_messages()) == 4
    assert set(memory.message_index) == {m.message_id for m in memory.get_messages()}
    memory.clear()
    assert memory.get_messages() == [] and not memory.message_index


def test_to_llm_format_role_transformations() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory

    memory = ConversationMemory()
    memory.add_message(
        Message(role="agent_call", content="Find Q4 numbers", metadata={"caller": "Planner"})
    )
    memory.add_message(Message(role="agent_response", content="Q4: 1.5M"))
    # - agent_call → user (with [Agent X] prefix)
    # - agent_response → assistant
    assert memory.to_llm_format() == [
        {"role": "user", "content": "[Request from Planner]: Find Q4 numbers"},
        {"role": "assistant", "content": "Q4: 1.5M"},
    ]


def test_memory_processing() -> None:
    from typing import Dict  # noqa: UP035 (the seed's code)

    from tiermem.messages import Message

    # Input processor: LLM response → Message
    def process_llm_response(response: Dict) -> Message:  # noqa: UP006
        if "tool_calls" in response:
            return Message(
                role="assistant",
                content=response.get("content", ""),
                tool_calls=response["tool_calls"],
            )
        return Message(role="assistant", content=response["content"])

    # Output processor: Message → LLM format
    def process_for_llm(message: Message) -> Dict:  # noqa: UP006
        if message.role == "agent_call":
            # Transform to user message with agent context
            return {
                "role": "user",
                "content": f"[Request from {message.metadata.get('caller')}]: {message.content}",
            }
        return message.to_llm_dict()

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert process_llm_response({"content": "hi"}).content == "hi"
    assert process_llm_response({"content": "", "tool_calls": [call]}).tool_calls == [call]
    caller = Message(role="agent_call", content="go", metadata={"caller": "Boss"})
    assert process_for_llm(caller) == {"role": "user", "content": "[Request from Boss]: go"}
    assert process_for_llm(Message(role="user", content="x")) == {"role": "user", "content": "x"}


def test_memory_manager_seed_api() -> None:
    from tiermem.patterns import MemoryManager

    manager = MemoryManager(
        retention_policy="single_run",
        max_messages=None,
        auto_summarize=False,
        summarize_threshold=100,
    )
    memory = manager.get_memory("researcher")
    assert manager.get_memory("researcher") is memory
    _seed_memory_flow(memory)
    _seed_memory_flow(manager.memory)
    manager.apply_retention_policy()
    assert memory.get_messages() == [] and manager.memory.get_messages() == []

    session = MemoryManager(retention_policy="session")
    _seed_memory_flow(session.get_memory("a"))
    session.apply_retention_policy()
    assert len(session.get_memory("a").get_messages()) == 4


def test_episodic_memory_seed_api() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import EpisodicMemory

    episodic = EpisodicMemory(embedder=HashEmbedder(64))
    episodic.current_episode.add_message(
        Message(role="user", content="book flights to tokyo in may")
    )
    episodic.current_episode.add_message(
        Message(role="assistant", content="Found flights to tokyo.")
    )
    episodic.start_new_episode({"topic": "travel"})
    episodic.current_episode.add_message(
        Message(role="user", content="fix the failing build on ci")
    )
    episodic.start_new_episode()
    episodic.start_new_episode()  # empty episodes are not kept
    assert len(episodic.episodes) == 2
    assert episodic.episode_metadata == [{"topic": "travel"}, {}]
    assert episodic.recall_episode("flights to tokyo") is episodic.episodes[0]
    assert episodic.recall_episode("failing build") is episodic.episodes[1]
    summaries = episodic.summarize_episodes()
    assert summaries[0].startswith("Episode 1: 2 messages\n")
    assert "tokyo" in summaries[0] and "build" in summaries[1]


def test_shared_memory_pool_seed_api() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory, SharedMemoryPool

    pool = SharedMemoryPool()
    pool.agent_memories["analyst"] = ConversationMemory()
    pool.agent_memories["writer"] = ConversationMemory()
    insight = pool.share_insight("analyst", "Q4 growth is driven by EMEA")
    assert insight.role == "system"
    assert insight.content == "[Shared by analyst]: Q4 growth is driven by EMEA"
    assert insight.metadata == {"shared": True, "source": "analyst"}
    assert pool.get_shared_context() == [insight]
    announcement = Message(role="system", content="Deadline moved to Friday")
    pool.broadcast_message(announcement)
    for memory in pool.agent_memories.values():
        assert memory.get_messages() == [announcement]


def test_hierarchical_memory_seed_api() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import HierarchicalMemory

    memory = HierarchicalMemory()
    assert memory.importance_threshold == 0.7
    critical = Message(role="user", content="My account id is 4417")
    memory.add_message_with_importance(critical, 0.9)
    for i in range(60):
        memory.add_message_with_importance(Message(role="user", content=f"chat {i}"), 0.1)
    assert memory.core_memory.get_messages() == [critical]
    assert len(memory.working_memory.messages) == 50
    assert [m.content for m in memory.episodic_memory.messages][:2] == [
        "My account id is 4417",
        "chat 0",
    ]
    context = memory.get_context_for_llm()
    assert context[0] == {"role": "user", "content": "My account id is 4417"}
    assert context[1:] == [{"role": "user", "content": f"chat {i}"} for i in range(10, 60)]


def test_manage_token_limit() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory, manage_token_limit
    from tiermem.tokens import get_token_counter

    memory = ConversationMemory()
    memory.add_message(Message(role="system", content="You are terse."))
    for i in range(50):
        memory.add_message(Message(role="user", content=f"question number {i} about the report"))
    kept = manage_token_limit(memory, max_tokens=100, preserve_system=True)
    counter = get_token_counter()
    assert kept[0].content == "You are terse."
    assert sum(counter.count_message(m) for m in kept) <= 100
    assert kept[-1].content == "question number 49 about the report"
    assert [m.content for m in kept[1:]] == [
        m.content for m in memory.get_messages()[-len(kept) + 1 :]
    ]
    without = manage_token_limit(memory, max_tokens=100, preserve_system=False)
    assert all(m.role != "system" for m in without) and len(without) > len(kept) - 1


async def test_summarize_memory_with_a_summarizer_agent(
    fake_server: FakeServer,
) -> None:
    from tiermem.agent import Agent
    from tiermem.llm import OpenAIModel
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory, summarize_memory

    fake_server.chat_reply = lambda body: "Alice chose plan B; budget is 40k."
    summarizer_agent = Agent(
        name="summarizer",
        model=OpenAIModel("gpt-4o-mini", base_url=fake_server.openai_url, api_key="k"),
    )
    memory = ConversationMemory()
    for i in range(25):
        memory.add_message(Message(role="user", content=f"message {i}"))
    recent = memory.get_messages()[-20:]

    summary = await summarize_memory(memory, summarizer_agent, chunk_size=20)

    assert summary == "Alice chose plan B; budget is 40k."
    prompt = fake_server.requests[0].json["messages"][-1]["content"]
    assert "Summarize this conversation, preserving key information:" in prompt
    assert "user: message 0\n" in prompt and "message 5" not in prompt
    messages = memory.get_messages()
    assert messages[0].role == "system"
    assert (
        messages[0].content == "Previous conversation summary: Alice chose plan B; budget is 40k."
    )
    assert messages[1:] == recent
    assert await summarize_memory(memory, summarizer_agent, chunk_size=21) == ""


def test_best_practice_preserve_message_ids() -> None:
    from tiermem.messages import Message
    from tiermem.messages import generate_id as generate_unique_id
    from tiermem.patterns import ConversationMemory

    memory = ConversationMemory()

    # ✅ GOOD - Maintain IDs for tracking
    message = Message(role="user", content="Hello", message_id=generate_unique_id())
    memory.add_message(message)

    # Reference later
    related_message = Message(
        role="assistant", content="Response", metadata={"in_reply_to": message.message_id}
    )

    # ❌ BAD - No tracking
    memory.add_message(Message(role="user", content="Hello"))

    assert related_message.metadata["in_reply_to"] in memory.message_index
    assert len({m.message_id for m in memory.get_messages()}) == 2


def test_best_practice_retention() -> None:
    from tiermem.agent import Agent

    # ✅ GOOD - Match retention to use case
    # Short task
    quick_agent = Agent(memory_retention="single_run")

    # Workflow that needs context
    workflow_agent = Agent(memory_retention="session")

    # Long-term assistant
    persistent_agent = Agent(memory_retention="persistent")

    # ❌ BAD - Wrong retention
    long_research_agent = Agent(memory_retention="single_run")  # Loses context!

    assert quick_agent.memory_manager.retention_policy == "single_run"
    assert workflow_agent.memory_manager.retention_policy == "session"
    assert persistent_agent.memory_manager.retention_policy == "persistent"
    assert long_research_agent.memory_manager is not quick_agent.memory_manager


def test_best_practice_tool_results() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory

    memory = ConversationMemory()
    result = '{"rows": 3}'
    # The seed writes tool_calls=[{...}]; a complete call is spelled out here.
    call = {
        "id": "call_123",
        "type": "function",
        "function": {"name": "tool_name", "arguments": "{}"},
    }

    # ✅ GOOD - Proper tool result handling
    # Tool call
    memory.add_message(Message(role="assistant", tool_calls=[call], message_id="msg_1"))

    # Tool result with reference
    memory.add_message(
        Message(role="tool", content=result, tool_call_id="call_123", name="tool_name")
    )

    # ❌ BAD - No association
    memory.add_message(Message(role="tool", content=result))

    assert memory.to_llm_format()[1]["tool_call_id"] == "call_123"
    assert "tool_call_id" not in memory.to_llm_format()[2]


async def test_best_practice_monitor_memory_size(fake_server: FakeServer) -> None:
    from tiermem.agent import Agent
    from tiermem.llm import OpenAIModel

    # ✅ GOOD - Active memory management
    class ManagedMemoryAgent(Agent):
        def __init__(self, max_memory_size=100, **kwargs):
            super().__init__(**kwargs)
            self.max_memory_size = max_memory_size

        async def _run(self, prompt, context, **kwargs):
            # Check memory size
            if len(self.memory.messages) > self.max_memory_size:
                # Summarize or prune old messages
                await self._compress_memory()

            return await super()._run(prompt, context, **kwargs)

    model = OpenAIModel("gpt-4o-mini", base_url=fake_server.openai_url, api_key="k")
    agent = ManagedMemoryAgent(max_memory_size=6, name="managed", model=model)
    for i in range(6):
        reply = await agent.run(f"note {i}: the code word is tango{i}")
        assert reply.content == f"reply: note {i}: the code word is tango{i}"
        assert len(agent.memory.messages) <= 8
    summaries = [m for m in agent.memory.messages if m.role == "system"]
    assert summaries and summaries[0].content.startswith("Previous conversation summary: ")


def test_coordinated_memory_system_seed_api() -> None:
    from tiermem.messages import Message
    from tiermem.patterns import ConversationMemory, CoordinatedMemorySystem

    system = CoordinatedMemorySystem()
    system.agent_memories["writer"] = ConversationMemory()
    system.agent_memories["writer"].add_message(Message(role="user", content="Draft the intro"))
    system.register_fact("researcher", "The survey had 1,204 respondents")
    context = system.get_agent_context("writer")
    assert [m.content for m in context] == ["The survey had 1,204 respondents", "Draft the intro"]
    assert context[0].metadata == {"discovered_by": "researcher"}
    assert [m.content for m in system.get_agent_context("unknown")] == [
        "The survey had 1,204 respondents"
    ]
    assert [m.content for m in system.shared_facts.get_messages()] == [
        "The survey had 1,204 respondents"
    ]


class SeedEmbeddingModel:
    """The seed's embedding model shape: ``await embed(text)`` returns one vector."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)

    async def embed(self, text: str) -> np.ndarray:
        return self.inner.embed([text])[0]


@pytest.mark.parametrize(
    "model", [SeedEmbeddingModel(), HashEmbedder(64)], ids=["seed-shape", "tiermem"]
)
async def test_rag_memory_seed_api(model: Any) -> None:
    from tiermem.messages import Message
    from tiermem.patterns import RAGMemory

    rag = RAGMemory(model)
    texts = [
        "the invoice total is 4200 euros",
        "we met in berlin last spring",
        "the cat is called miso",
    ]
    for text in texts:
        await rag.add_with_embedding(Message(role="user", content=text))
    assert len(rag.embeddings) == 3
    relevant = await rag.retrieve_relevant("what is the invoice total", k=1)
    assert [m.content for m in relevant] == [texts[0]]
    ranked = await rag.retrieve_relevant("cat called miso", k=5)
    assert len(ranked) == 3 and ranked[0].content == texts[2]


def test_message_structure_round_trip() -> None:
    from tiermem.messages import Message

    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = Message(
        role="assistant",
        content={"a": 1},
        message_id="m1",
        name="bot",
        tool_calls=[call],
        agent_calls=[{"agent": "x"}],
        structured_data={"k": 2},
        images=["data:image/png;base64,AA"],
        metadata={"caller": "y"},
    )
    assert Message.from_json(message.to_json()) == message
    assert json.loads(message.to_json())["message_id"] == "m1"
