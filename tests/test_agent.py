"""Agent against the local OpenAI/Anthropic protocol server: prompts, memory kinds, tool
calls kept with their results, errors, retention, and the ``tiermem chat`` command."""

from __future__ import annotations

import io
import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from embedders import HashEmbedder
from fakeserver import FakeServer, Reply
from tiermem import BufferMemory
from tiermem.agent import Agent, tool_schema
from tiermem.cli.chat import run_chat
from tiermem.errors import (
    ConfigError,
    InputError,
    InvalidTypeError,
    MissingUserError,
    ProviderError,
)
from tiermem.llm import AnthropicModel, OpenAIModel
from tiermem.memory import Memory
from tiermem.patterns import ConversationMemory, MemoryManager


def _openai(server: FakeServer, **kw: Any) -> OpenAIModel:
    return OpenAIModel("gpt-4o-mini", base_url=server.openai_url, api_key="k", max_retries=0, **kw)


def _tool_reply(calls: list[dict[str, Any]]) -> Reply:
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5},
    }
    return Reply(body=json.dumps(body).encode())


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def get_weather(city: str, unit: str = "C") -> dict[str, Any]:
    """Current weather of a city."""
    return {"city": city, "temp": 21, "unit": unit}


def test_tool_calls_are_run_sent_back_and_kept_with_results(fake_server: FakeServer) -> None:
    fake_server.enqueue(
        _tool_reply([_call("c1", "get_weather", {"city": "Lisbon"}), _call("c2", "nope", {})])
    )
    buffer = BufferMemory(buffer_size=20)
    agent = Agent("a", _openai(fake_server), "Be brief.", buffer_memory=buffer, tools=[get_weather])
    answer = agent.chat("Weather in Lisbon?")
    first, second = (r.json for r in fake_server.requests)
    assert first["tools"] == [
        {"type": "function", "function": tool_schema("get_weather", get_weather)}
    ]
    assert first["tools"][0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    }
    tool_results = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_results[0] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"city": "Lisbon", "temp": 21, "unit": "C"}),
    }
    assert tool_results[1]["content"] == "error: no tool named 'nope'"
    assert answer == "reply: error: no tool named 'nope'"  # the fake server echoes the last message
    roles = [m.role for m in buffer.get_messages()]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    assert buffer.get_messages()[1].tool_calls[0]["id"] == "c1"  # type: ignore[index]


def test_tool_rounds_are_bounded(fake_server: FakeServer) -> None:
    fake_server.enqueue(
        *[_tool_reply([_call(f"c{i}", "get_weather", {"city": "X"})]) for i in range(3)]
    )
    agent = Agent("a", _openai(fake_server), tools={"get_weather": get_weather}, max_tool_rounds=2)
    agent.chat("loop")
    assert len(fake_server.requests) == 3
    assert "tools" not in fake_server.requests[-1].json  # the last call must answer


def test_failing_tool_is_reported_to_the_model(fake_server: FakeServer) -> None:
    def explode(x: int) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    fake_server.enqueue(_tool_reply([_call("c1", "explode", {"x": 1})]))
    agent = Agent("a", _openai(fake_server), tools=[explode])
    agent.chat("go")
    tool = next(m for m in fake_server.requests[1].json["messages"] if m["role"] == "tool")
    assert tool["content"] == "error: RuntimeError: boom"


async def test_async_tools_and_achat(fake_server: FakeServer) -> None:
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    fake_server.enqueue(_tool_reply([_call("c1", "lookup", {"key": "k9"})]))
    agent = Agent("a", _openai(fake_server), tools=[lookup])
    answer = await agent.achat("find k9")
    assert answer.startswith("reply: ")
    assert [m.text for m in agent.memory.get_messages() if m.role == "tool"] == ["value-of-k9"]


def test_anthropic_provider_with_tools(fake_server: FakeServer) -> None:
    body = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Oslo"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    fake_server.enqueue(Reply(body=json.dumps(body).encode()))
    model = AnthropicModel("claude", base_url=fake_server.url, api_key="k", max_retries=0)
    agent = Agent("a", model, "You are terse.", tools=[get_weather])
    agent.chat("Oslo weather?")
    first, second = (r.json for r in fake_server.requests)
    assert first["system"] == "You are terse."
    assert first["tools"][0]["input_schema"]["required"] == ["city"]
    blocks = [b for m in second["messages"] for b in m["content"]]
    assert {
        "type": "tool_result",
        "tool_use_id": "tu1",
        "content": json.dumps({"city": "Oslo", "temp": 21, "unit": "C"}),
    } in blocks


def test_memory_facade_context_and_recording(fake_server: FakeServer, tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(64))
    agent = Agent("a", _openai(fake_server), "sys", memory=memory, user_id="alice", session_id="s1")
    agent.chat("My name is Charlie and I live in Porto.")
    agent.chat("What's my name?")
    second = fake_server.requests[1].json["messages"]
    assert second[0] == {"role": "system", "content": "sys"}
    assert second[-1] == {"role": "user", "content": "What's my name?"}
    assert any("Charlie" in str(m["content"]) for m in second[1:-1])
    memory.flush()
    assert memory.search("Porto", "alice", k=5)
    assert memory.search("Porto", "bob", k=5) == []
    with pytest.raises(MissingUserError):
        Agent("a", _openai(fake_server), memory=memory)
    memory.close()


def test_provider_error_records_nothing(fake_server: FakeServer) -> None:
    fake_server.fail_next(500)
    buffer = BufferMemory(buffer_size=5)
    agent = Agent("a", _openai(fake_server), buffer_memory=buffer)
    with pytest.raises(ProviderError):
        agent.chat("hello")
    assert buffer.get_messages() == []


def test_validation() -> None:
    with pytest.raises(ConfigError, match="no chat model"):
        Agent("a").chat("hi")
    with pytest.raises(InputError):
        Agent("a", buffer_memory=BufferMemory(), memory=ConversationMemory())
    with pytest.raises(InvalidTypeError):
        Agent("a", model=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        Agent("")
    with pytest.raises(InvalidTypeError):
        Agent("a", memory={"not": "memory"})
    agent = Agent("a")
    with pytest.raises(InputError):
        agent._user_message("   ")


def test_single_run_forgets_and_session_remembers(fake_server: FakeServer) -> None:
    quick = Agent("q", _openai(fake_server), memory_retention="single_run")
    quick.chat("first")
    quick.chat("second")
    assert [m["content"] for m in fake_server.requests[1].json["messages"]] == ["second"]
    session = Agent("s", _openai(fake_server), memory_retention="session")
    session.chat("first")
    session.chat("second")
    assert len(fake_server.requests[3].json["messages"]) == 3


def test_persistent_agent_resumes(fake_server: FakeServer, tmp_path: Path) -> None:
    def manager() -> MemoryManager:
        memory = Memory(str(tmp_path / "p.db"), embedder=HashEmbedder(32))
        return MemoryManager("persistent", memory=memory, user_id="u")

    first = manager()
    Agent("helper", _openai(fake_server), memory_manager=first).chat("remember the code 1234")
    first._memory.close()  # type: ignore[union-attr]
    second = manager()
    Agent("helper", _openai(fake_server), memory_manager=second).chat("what was the code?")
    sent = fake_server.requests[-1].json["messages"]
    assert [m["content"] for m in sent] == [
        "remember the code 1234",
        "reply: remember the code 1234",
        "what was the code?",
    ]
    second._memory.close()  # type: ignore[union-attr]


def test_max_context_tokens_trims_history(fake_server: FakeServer) -> None:
    agent = Agent("a", _openai(fake_server), max_context_tokens=30)
    for i in range(10):
        agent.chat(f"message number {i} with a few extra words")
    sent = fake_server.requests[-1].json["messages"]
    assert sent[-1]["content"] == "message number 9 with a few extra words"
    assert len(sent) < 19


# -- tiermem chat ---------------------------------------------------------------------------


def _args(**kw: Any) -> Namespace:
    base = {
        "config": None,
        "model": None,
        "user": "default",
        "session": None,
        "system": None,
        "db": None,
        "buffer_only": True,
    }
    return Namespace(**{**base, **kw})


def test_chat_without_model_says_what_to_configure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_chat(_args(), stdin=io.StringIO("hi\n")) == 2
    err = capsys.readouterr().err
    assert "No chat model is configured" in err and "chat: openai/gpt-4o-mini" in err


def test_chat_with_configured_model(fake_server: FakeServer, tmp_path: Path) -> None:
    config = tmp_path / "tiermem.yaml"
    config.write_text(
        f"llm:\n  models:\n    - chat: openai/gpt-4o-mini\n  base_url: {fake_server.openai_url}\n  api_key: k\n"
    )
    out = io.StringIO()
    code = run_chat(
        _args(config=str(config), system="Be nice."),
        stdin=io.StringIO("Hello, I am Dana\n\nWho am I?\nquit\nignored\n"),
        console=Console(file=out, width=200),
    )
    assert code == 0
    assert len(fake_server.requests) == 2
    assert "Dana" in json.dumps(fake_server.requests[1].json["messages"])
    assert "assistant: reply: Who am I?" in out.getvalue()


def test_chat_reports_provider_errors_and_continues(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    fake_server.fail_next(400)
    out = io.StringIO()
    config = {
        "llm": {
            "models": [{"chat": "openai/m"}],
            "base_url": fake_server.openai_url,
            "api_key": "k",
        }
    }
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config))
    code = run_chat(
        _args(config=str(path)), stdin=io.StringIO("a\nb\n"), console=Console(file=out, width=200)
    )
    assert code == 0
    assert "error:" in out.getvalue() and "reply: b" in out.getvalue()
