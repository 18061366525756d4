"""LLM providers over HTTP against the local fake server, for both protocols."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from tiermem.errors import (
    AuthenticationError,
    ConfigError,
    InputError,
    InvalidTypeError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)
from tiermem.llm import AnthropicModel, Completion, HttpChatModel, OpenAIModel, get_llm

PROTOCOLS = ["openai", "anthropic"]
HELLO = [{"role": "user", "content": "hello there"}]


def make(protocol: str, server: FakeServer, **kw: Any) -> HttpChatModel:
    opts: dict[str, Any] = {"api_key": "sk-test", "timeout": 2.0, "backoff": 0.01}
    opts.update(kw)
    if protocol == "openai":
        return OpenAIModel("gpt-4o-mini", base_url=server.openai_url, **opts)
    return AnthropicModel("claude-test", base_url=server.url, **opts)


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def keyed_server(fake_server: FakeServer) -> FakeServer:
    fake_server.api_key = "sk-test"
    return fake_server


def test_success_text_and_usage(protocol: str, keyed_server: FakeServer) -> None:
    llm = make(protocol, keyed_server)
    result = llm.complete(HELLO, temperature=0)
    assert isinstance(result, Completion)
    assert result.text == "reply: hello there"
    assert result.usage.prompt_tokens == 2
    assert result.usage.completion_tokens == 3
    assert result.usage.total_tokens == 5
    assert result.finish_reason in ("stop", "end_turn")
    assert keyed_server.requests[0].json["temperature"] == 0
    assert llm.total_usage.total_tokens == 5 and llm.calls == 1


def test_generate_is_seed_compatible(protocol: str, keyed_server: FakeServer) -> None:
    llm = make(protocol, keyed_server)
    assert llm.generate("Summarize this") == "reply: Summarize this"
    content = keyed_server.requests[0].json["messages"][0]["content"]
    assert content in ("Summarize this", [{"type": "text", "text": "Summarize this"}])


def test_slow_response_within_timeout(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.delay = 0.3
    assert make(protocol, keyed_server).complete(HELLO).text
    keyed_server.settle()
    assert len(keyed_server.requests) == 1 and keyed_server.answered == 1


def test_timeout_raises_after_retries(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.delay = 2.0
    llm = make(protocol, keyed_server, timeout=0.1, max_retries=1)
    with pytest.raises(ProviderTimeoutError):
        llm.complete(HELLO)
    assert len(keyed_server.requests) == 2
    assert llm.calls == 0


def test_429_then_success(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.fail_next(429, retry_after="0")
    result = make(protocol, keyed_server).complete(HELLO)
    assert result.text == "reply: hello there"
    assert len(keyed_server.requests) == 2


def test_429_forever_is_rate_limit_error(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.fail_next(429, 429, 429, retry_after="0")
    with pytest.raises(RateLimitError):
        make(protocol, keyed_server, max_retries=2).complete(HELLO)


def test_500_then_success_and_500_exhausted(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.fail_next(500)
    assert make(protocol, keyed_server).complete(HELLO).text
    keyed_server.fail_next(500, 500)
    with pytest.raises(ProviderResponseError, match="500"):
        make(protocol, keyed_server, max_retries=1).complete(HELLO)


@pytest.mark.parametrize(
    "raw",
    [b"<html>bad gateway</html>", b'{"choices": []}', b'{"content": "x"}', b"null"],
)
def test_malformed_body(protocol: str, keyed_server: FakeServer, raw: bytes) -> None:
    keyed_server.enqueue(Reply(body=raw))
    with pytest.raises(ProviderResponseError):
        make(protocol, keyed_server).complete(HELLO)


def test_missing_key_is_rejected_by_server(protocol: str, keyed_server: FakeServer) -> None:
    llm = make(protocol, keyed_server, api_key="")
    with pytest.raises(AuthenticationError):
        llm.complete(HELLO)


def test_wrong_key_is_authentication_error(protocol: str, keyed_server: FakeServer) -> None:
    with pytest.raises(AuthenticationError, match="API_KEY"):
        make(protocol, keyed_server, api_key="wrong").complete(HELLO)
    assert len(keyed_server.requests) == 1  # not retried


def test_missing_key_on_hosted_api_fails_before_network(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    llm = get_llm(f"{protocol}/some-model")
    with pytest.raises(AuthenticationError, match=f"{protocol.upper()}_API_KEY"):
        llm.complete(HELLO)


def test_environment_variables_are_honoured(
    protocol: str, keyed_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = protocol.upper()
    monkeypatch.setenv(f"{prefix}_API_KEY", "sk-test")
    url = keyed_server.openai_url if protocol == "openai" else keyed_server.url
    monkeypatch.setenv(f"{prefix}_BASE_URL", url)
    assert get_llm(f"{protocol}/m", backoff=0.01).complete(HELLO).text
    headers = keyed_server.requests[0].headers
    assert headers.get("authorization") == "Bearer sk-test" or headers["x-api-key"] == "sk-test"


async def test_async_complete_and_retry(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.fail_next(503, retry_after="0")
    llm = make(protocol, keyed_server)
    result = await llm.acomplete(HELLO)
    assert result.text == "reply: hello there"
    assert await llm.agenerate("x") == "reply: x"
    await llm.aclose()


async def test_async_concurrent_calls(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.hold_until(6)  # each answer waits until all six are in flight
    llm = make(protocol, keyed_server, timeout=60.0)
    results = await asyncio.gather(*(llm.acomplete(f"q{i}") for i in range(6)))
    assert [r.text for r in results] == [f"reply: q{i}" for i in range(6)]
    assert keyed_server.max_in_flight == 6  # the calls overlapped
    assert llm.calls == 6


async def test_async_timeout(protocol: str, keyed_server: FakeServer) -> None:
    keyed_server.delay = 2.0
    with pytest.raises(ProviderTimeoutError):
        await make(protocol, keyed_server, timeout=0.1, max_retries=0).acomplete(HELLO)


def test_anthropic_request_shape(keyed_server: FakeServer) -> None:
    llm = make("anthropic", keyed_server, max_tokens=50)
    llm.complete(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ]
    )
    request = keyed_server.requests[0]
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.json
    assert body["system"] == "be brief" and body["max_tokens"] == 50
    assert body["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "c1",
        "name": "weather",
        "input": {"city": "Oslo"},
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}],
    }


def test_anthropic_only_system_messages_is_input_error(keyed_server: FakeServer) -> None:
    with pytest.raises(InputError, match="system"):
        make("anthropic", keyed_server).complete([{"role": "system", "content": "x"}])
    assert keyed_server.requests == []


class _Msg:
    def to_openai(self) -> dict[str, Any]:
        return {"role": "user", "content": "from object"}


def test_objects_with_to_openai_are_accepted(keyed_server: FakeServer) -> None:
    assert make("openai", keyed_server).complete([_Msg()]).text == "reply: from object"


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([], InputError),
        (42, InvalidTypeError),
        ([42], InvalidTypeError),
        ([{"role": "wizard", "content": "x"}], InputError),
        ([{"content": "no role"}], InputError),
    ],
)
def test_bad_messages_raise_before_network(
    keyed_server: FakeServer, messages: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        make("openai", keyed_server).complete(messages)
    assert keyed_server.requests == []


def test_reserved_options_rejected(keyed_server: FakeServer) -> None:
    with pytest.raises(InputError, match="model"):
        make("openai", keyed_server).complete(HELLO, model="other")
    with pytest.raises(InputError, match="messages"):
        OpenAIModel("x", base_url=keyed_server.openai_url, messages=[])
    assert keyed_server.requests == []


def test_factory() -> None:
    assert isinstance(get_llm("openai/gpt-4o-mini", api_key="k"), OpenAIModel)
    assert isinstance(get_llm("openai:gpt-4o-mini", api_key="k"), OpenAIModel)
    llm = get_llm("openai/meta-llama/Llama-3-8B", base_url="http://127.0.0.1:1/v1")
    assert llm.model == "meta-llama/Llama-3-8B"
    assert get_llm("openai/llama3.1:8b", api_key="k").model == "llama3.1:8b"
    assert isinstance(get_llm("Anthropic/claude", api_key="k"), AnthropicModel)
    for bad in ("gpt-4o", "nope/model", "openai/", "", 3):
        with pytest.raises(ConfigError):
            get_llm(bad)  # type: ignore[arg-type]


def test_seed_openai_model_constructor() -> None:
    model = OpenAIModel("gpt-3.5-turbo", api_key="k")
    assert model.model == "gpt-3.5-turbo" and model.model_id == "openai/gpt-3.5-turbo"
    assert "api.openai.com" in repr(model)


def test_usage_is_estimated_when_the_provider_omits_it(keyed_server: FakeServer) -> None:
    body = b'{"choices": [{"message": {"role": "assistant", "content": "four words right here"}}]}'
    keyed_server.enqueue(Reply(body=body))
    result = make("openai", keyed_server).complete(HELLO)
    assert result.usage.estimated
    assert result.usage.completion_tokens == 4
    assert result.usage.prompt_tokens >= 2
