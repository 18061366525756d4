"""HttpClient against the local fake server: retries, backoff, typed errors, async twin."""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import time

import pytest

from fakeserver import FakeServer, Reply
from tiermem.aio.http import HttpClient, require_api_key
from tiermem.errors import (
    AuthenticationError,
    InputError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}


def client(server: FakeServer, **kw: object) -> HttpClient:
    opts: dict[str, object] = {"timeout": 2.0, "max_retries": 3, "backoff": 0.01}
    opts.update(kw)
    return HttpClient(server.openai_url, {"Authorization": "Bearer k"}, **opts)  # type: ignore[arg-type]


def test_success_returns_json_and_sends_headers(fake_server: FakeServer) -> None:
    http = client(fake_server)
    data = http.post_json("/chat/completions", BODY)
    assert data["choices"][0]["message"]["content"] == "reply: hello there"
    assert fake_server.requests[0].headers["authorization"] == "Bearer k"
    assert fake_server.requests[0].json == BODY
    http.close()


def test_429_then_success_retries_with_retry_after(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda seconds: (waits.append(seconds), sleep(seconds)))
    fake_server.fail_next(429, 503, retry_after="0.2")
    http = client(fake_server)
    data = http.post_json("chat/completions", BODY)
    assert waits == [0.2, 0.2]  # each wait is what the server's Retry-After asked
    assert data["object"] == "chat.completion"
    assert len(fake_server.requests) == 3


def test_rate_limit_exhausted_raises_rate_limit_error(fake_server: FakeServer) -> None:
    fake_server.fail_next(429, 429, 429)
    with pytest.raises(RateLimitError, match="429"):
        client(fake_server, max_retries=2).post_json("chat/completions", BODY)
    assert len(fake_server.requests) == 3


def test_500_exhausted_raises_response_error(fake_server: FakeServer) -> None:
    fake_server.fail_next(500, 500)
    with pytest.raises(ProviderResponseError, match="HTTP 500"):
        client(fake_server, max_retries=1).post_json("chat/completions", BODY)
    assert len(fake_server.requests) == 2


def test_400_and_404_are_not_retried(fake_server: FakeServer) -> None:
    fake_server.fail_next(400)
    with pytest.raises(ProviderResponseError, match="HTTP 400"):
        client(fake_server).post_json("chat/completions", BODY)
    with pytest.raises(ProviderResponseError, match="HTTP 404"):
        client(fake_server).post_json("nowhere", BODY)
    assert len(fake_server.requests) == 2


def test_wrong_key_is_authentication_error_not_retried(fake_server: FakeServer) -> None:
    fake_server.api_key = "right"
    http = HttpClient(fake_server.openai_url, {"Authorization": "Bearer wrong"}, auth_hint="set X")
    with pytest.raises(AuthenticationError, match="set X"):
        http.post_json("chat/completions", BODY)
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2]", b"\xff\xfe"])
def test_malformed_body_raises_response_error(fake_server: FakeServer, raw: bytes) -> None:
    fake_server.enqueue(Reply(body=raw))
    with pytest.raises(ProviderResponseError):
        client(fake_server).post_json("chat/completions", BODY)


def test_timeout_retries_then_raises_timeout_error(fake_server: FakeServer) -> None:
    fake_server.delay = 60.0  # answered only when the server stops
    http = client(fake_server, timeout=0.1, max_retries=1)
    with pytest.raises(ProviderTimeoutError):
        http.post_json("chat/completions", BODY)
    assert len(fake_server.requests) == 2 and fake_server.answered == 0  # gave up on both


def test_slow_answer_within_timeout_succeeds(fake_server: FakeServer) -> None:
    fake_server.enqueue(Reply(delay=0.3))
    data = client(fake_server, timeout=2.0).post_json("chat/completions", BODY)
    assert data["choices"]
    assert len(fake_server.requests) == 1


def test_connection_refused_is_provider_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = HttpClient(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01)
    with pytest.raises(ProviderError, match="cannot reach"):
        http.post_json("chat/completions", BODY)


@pytest.mark.parametrize(
    "kw",
    [{"base_url": "ftp://x"}, {"timeout": 0}, {"max_retries": -1}, {"backoff": -1.0}],
)
def test_bad_construction_arguments(kw: dict[str, object]) -> None:
    args: dict[str, object] = {"base_url": "http://127.0.0.1:1"}
    args.update(kw)
    with pytest.raises(InputError):
        HttpClient(**args)  # type: ignore[arg-type]


def test_require_api_key() -> None:
    assert require_api_key("k", "X_KEY", "p") == "k"
    for empty in (None, ""):
        with pytest.raises(AuthenticationError, match="X_KEY"):
            require_api_key(empty, "X_KEY", "p")


async def test_async_success_and_retry(fake_server: FakeServer) -> None:
    fake_server.fail_next(502, retry_after="0")
    http = client(fake_server)
    data = await http.apost_json("chat/completions", BODY)
    assert data["usage"]["total_tokens"] > 0
    assert len(fake_server.requests) == 2
    await http.aclose()


async def test_async_timeout_and_concurrency(fake_server: FakeServer) -> None:
    http = client(fake_server, timeout=60.0)
    fake_server.hold_until(5)  # each answer waits until all five are in flight
    results = await asyncio.gather(*(http.apost_json("chat/completions", BODY) for _ in range(5)))
    assert len(results) == 5
    assert fake_server.max_in_flight == 5  # concurrent, not serial
    fake_server.hold_until(0)
    fake_server.delay = 60.0
    with pytest.raises(ProviderTimeoutError):
        await client(fake_server, timeout=0.1, max_retries=0).apost_json("chat/completions", BODY)
    assert fake_server.answered == 5
    await http.aclose()


def test_async_client_survives_separate_event_loops(fake_server: FakeServer) -> None:
    http = client(fake_server)
    for _ in range(2):
        assert asyncio.run(http.apost_json("chat/completions", BODY))["choices"]
    assert len(fake_server.requests) == 2


def test_fake_server_embeddings_protocol(fake_server: FakeServer) -> None:
    fake_server.embed = lambda texts: [[float(len(t)), 0.5] for t in texts]
    http = client(fake_server)
    data = http.post_json("embeddings", {"model": "e", "input": ["ab", "abcd"]})
    assert [d["embedding"] for d in data["data"]] == [[2.0, 0.5], [4.0, 0.5]]
    assert data["usage"]["prompt_tokens"] == 2
    one = http.post_json("embeddings", {"model": "e", "input": "abc", "encoding_format": "base64"})
    raw = base64.b64decode(one["data"][0]["embedding"])
    assert struct.unpack("<2f", raw) == (3.0, 0.5)


def test_fake_server_anthropic_requires_version_header(fake_server: FakeServer) -> None:
    http = HttpClient(fake_server.url, {"x-api-key": "k"}, max_retries=0)
    body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    with pytest.raises(ProviderResponseError, match="anthropic-version"):
        http.post_json("/v1/messages", body)
    with pytest.raises(ProviderResponseError, match="max_tokens"):
        HttpClient(fake_server.url, {"anthropic-version": "2023-06-01"}).post_json(
            "/v1/messages", {"model": "c", "messages": []}
        )
