"""TiermemSession and context_instructions against the real openai-agents SDK.

The agent talks to the local OpenAI-protocol server (tests/fakeserver.py) through the SDK's
chat completions model with a custom base_url client.
"""

from __future__ import annotations

import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI

from fakeserver import FakeServer, Reply
from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, MissingUserError
from tiermem.integrations.openai_agents import TiermemSession, context_instructions
from tiermem.memory import Memory

NO_TRACING = RunConfig(tracing_disabled=True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"21C and sunny in {city}"


def model(server: FakeServer) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=server.openai_url, api_key="test-key", max_retries=0)
    return OpenAIChatCompletionsModel("gpt-test", openai_client=client)


def tool_call_reply(name: str, arguments: dict) -> Reply:
    body = {
        "id": "chatcmpl-tool",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_w1",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }
    return Reply(body=json.dumps(body).encode())


def chat_requests(server: FakeServer) -> list[dict]:
    return [r.json for r in server.requests if r.path == "/v1/chat/completions"]


async def test_an_agent_run_stores_and_reads_its_items_through_the_session(
    memory: Memory, fake_server: FakeServer
) -> None:
    session = TiermemSession(memory, "ana", "chat-1")
    assert isinstance(session, Session)
    agent = Agent(
        name="assistant", instructions="Be brief.", model=model(fake_server), tools=[get_weather]
    )
    fake_server.enqueue(tool_call_reply("get_weather", {"city": "Lisbon"}))
    result = await Runner.run(agent, "Weather in Lisbon?", session=session, run_config=NO_TRACING)
    assert "21C and sunny in Lisbon" in result.final_output

    items = await TiermemSession(memory, "ana", "chat-1").get_items()
    kinds = [i.get("type", "message") for i in items]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert items[0]["content"] == "Weather in Lisbon?"
    assert items[1]["call_id"] == "call_w1" and json.loads(items[1]["arguments"]) == {
        "city": "Lisbon"
    }
    assert items[2]["output"] == "21C and sunny in Lisbon"
    assert items[3]["role"] == "assistant"

    # the second run reads the first one back through the session
    await Runner.run(agent, "And tomorrow?", session=session, run_config=NO_TRACING)
    sent = chat_requests(fake_server)[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert len(await session.get_items()) == 6
    last_two = await session.get_items(limit=2)
    assert last_two[0]["content"] == "And tomorrow?" and last_two[1]["role"] == "assistant"

    # they are tiermem messages of the session too
    memory.flush()
    assert memory.store.index.count("ana", session_id="chat-1", memory_type="tool") == 1
    assert any("Lisbon" in h.record.content for h in memory.search("sunny Lisbon", "ana"))


async def test_pop_and_clear(memory: Memory) -> None:
    session = TiermemSession(memory, "ana", "s")
    await session.add_items(
        [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    )
    assert await session.pop_item() == {"role": "user", "content": "two"}
    assert await session.get_items() == [{"role": "user", "content": "one"}]
    assert await session.pop_item() == {"role": "user", "content": "one"}
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "three"}])
    await session.clear_session()
    assert await session.get_items() == []
    memory.flush()
    assert memory.store.index.count("ana", session_id="s") == 0


async def test_limits_from_call_and_settings(memory: Memory) -> None:
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    session = TiermemSession(memory, "ana", "s", session_settings=SessionSettings(limit=2))
    await session.add_items(items)
    assert await session.get_items() == items[-2:]
    assert await session.get_items(limit=3) == items[-3:]
    assert await session.get_items(limit=0) == []
    with pytest.raises(InvalidSizeError):
        await session.get_items(limit=-1)


async def test_unknown_item_kinds_are_kept_as_given(memory: Memory) -> None:
    session = TiermemSession(memory, "ana", "s")
    odd = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "thinking"}],
        },
        {"role": "developer", "content": [{"type": "input_text", "text": "be kind"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            "id": "m1",
            "status": "completed",
        },
    ]
    await session.add_items(odd)
    assert await TiermemSession(memory, "ana", "s").get_items() == odd


async def test_users_are_isolated(memory: Memory) -> None:
    ana = TiermemSession(memory, "ana", "same")
    bob = TiermemSession(memory, "bob", "same")
    await ana.add_items([{"role": "user", "content": "ana's card ends 9911"}])
    assert await bob.get_items() == []
    assert await bob.pop_item() is None
    await bob.clear_session()
    assert len(await ana.get_items()) == 1


async def test_context_instructions_put_the_users_memories_in_the_prompt(
    memory: Memory, fake_server: FakeServer
) -> None:
    memory.remember("Ana's favourite city is Porto.", "ana", "preference")
    memory.remember("Bob's favourite city is Oslo.", "bob", "preference")
    agent = Agent(
        name="assistant",
        instructions=context_instructions(memory, "ana", "You are a travel agent."),
        model=model(fake_server),
    )
    await Runner.run(agent, "Which city is my favourite?", run_config=NO_TRACING)
    system = chat_requests(fake_server)[-1]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a travel agent.")
    assert "Porto" in system["content"] and "Oslo" not in system["content"]


async def test_bad_input_gets_typed_errors(memory: Memory) -> None:
    with pytest.raises(MissingUserError):
        TiermemSession(memory, "", "s")
    with pytest.raises(InputError):
        TiermemSession(memory, "ana", "")
    with pytest.raises(InvalidTypeError):
        TiermemSession(memory, "ana", "s", session_settings={"limit": 2})  # type: ignore[arg-type]
    session = TiermemSession(memory, "ana", "s")
    with pytest.raises(InvalidTypeError):
        await session.add_items({"role": "user", "content": "not a list"})  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError) as err:
        await session.add_items([{"role": "user", "content": "ok"}, "text"])
    assert err.value.field == "items[1]"
    with pytest.raises(InvalidTypeError):
        await session.add_items([{"content": "no role or type"}])
    with pytest.raises(InvalidTypeError):
        await session.add_items([{"type": "function_call", "arguments": "{}"}])
    with pytest.raises(InvalidTypeError):
        await session.add_items([{"role": "user", "content": float("nan")}])
    with pytest.raises(MissingUserError):
        context_instructions(memory, None, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidSizeError):
        context_instructions(memory, "ana", max_tokens=0)
    assert await session.get_items() == []
