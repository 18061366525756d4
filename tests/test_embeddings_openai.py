"""OpenAIEmbedder against a local server speaking the OpenAI embeddings protocol."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import numpy as np
import pytest

from embedders import HashEmbedder
from fakeserver import FakeServer, Reply
from tiermem.embeddings import get_embedder
from tiermem.embeddings.openai import OpenAIEmbedder
from tiermem.errors import (
    AuthenticationError,
    ConfigError,
    DimensionMismatchError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)
from tiermem.working.memory import WorkingMemory

DIM = 24
_hash = HashEmbedder(DIM, cache_size=0)


def server_vectors(texts: list[str]) -> list[list[float]]:
    """Unnormalized vectors (x3) so the client's normalization is exercised."""
    return (_hash.embed(texts) * 3.0).tolist()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(api_key="sk-test", embed=server_vectors) as fake:
        yield fake


def make(server: FakeServer, **kw: object) -> OpenAIEmbedder:
    opts: dict[str, object] = {
        "base_url": server.openai_url,
        "api_key": "sk-test",
        "dimensions": DIM,
        "timeout": 2.0,
        "backoff": 0.01,
    }
    opts.update(kw)
    return OpenAIEmbedder("my-embedder", **opts)  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_embeds_normalizes_and_sends_the_protocol(server: FakeServer, encoding: str) -> None:
    emb = make(server, encoding_format=encoding)
    out = emb.embed(["hello world", "second text"])
    np.testing.assert_allclose(out, _hash.embed(["hello world", "second text"]), atol=1e-6)
    request = server.requests[-1]
    assert request.path == "/v1/embeddings"
    assert request.headers.get("authorization") == "Bearer sk-test"
    assert request.json == {
        "model": "my-embedder",
        "input": ["hello world", "second text"],
        "encoding_format": encoding,
    }
    assert emb.model_id == "openai/my-embedder" and emb.dimension == DIM


def test_batches_and_cache_limit_requests(server: FakeServer) -> None:
    emb = make(server, batch_size=2)
    emb.embed([f"text {i}" for i in range(5)])
    assert [len(r.json["input"]) for r in server.requests] == [2, 2, 1]
    emb.embed(["text 0", "text 4", "new one"])
    assert server.requests[-1].json["input"] == ["new one"] and len(server.requests) == 4


def test_dimensions_sent_only_to_models_that_take_it(server: FakeServer) -> None:
    emb = OpenAIEmbedder(
        "text-embedding-3-small", base_url=server.openai_url, api_key="sk-test", dimensions=DIM
    )
    emb.embed(["shortened"])
    assert server.requests[-1].json["dimensions"] == DIM
    assert OpenAIEmbedder("text-embedding-3-large", base_url=server.openai_url).dimension == 3072


def test_shuffled_indices_are_put_back_in_order(server: FakeServer) -> None:
    emb = make(server)
    a, b = (np.asarray(v, dtype=np.float32) for v in server_vectors(["a a", "b b"]))
    data = [{"index": 1, "embedding": b.tolist()}, {"index": 0, "embedding": a.tolist()}]
    body = json.dumps({"data": data}).encode()
    server.enqueue(Reply(body=body))
    out = emb.embed(["a a", "b b"])
    np.testing.assert_allclose(out[0], a / np.linalg.norm(a), atol=1e-6)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"data": []}', ProviderResponseError),
        (b'{"nothing": 1}', ProviderResponseError),
        (b'{"data": [{"index": 0}]}', ProviderResponseError),
        (b'{"data": [{"index": 5, "embedding": [1.0]}]}', ProviderResponseError),
        (b'{"data": [{"index": 0, "embedding": "not base64!"}]}', ProviderResponseError),
        (b'{"data": [{"index": 0, "embedding": [1.0, 2.0]}]}', DimensionMismatchError),
        (
            b'{"data": [{"index": 0, "embedding": [NaN' + b", 1.0" * (DIM - 1) + b"]}]}",
            ProviderResponseError,
        ),
        (b"not json at all", ProviderResponseError),
    ],
)
def test_malformed_answers_raise_typed_errors(
    server: FakeServer, body: bytes, error: type[Exception]
) -> None:
    emb = make(server, max_retries=0)
    server.enqueue(Reply(body=body))
    with pytest.raises(error):
        emb.embed(["only one"])
    assert len(emb.cache) == 0


def test_retries_then_succeeds_and_errors_are_typed(server: FakeServer) -> None:
    emb = make(server, max_retries=2)
    server.fail_next(429, 503, retry_after="0")
    assert emb.embed(["after retries"]).shape == (1, DIM)
    assert len(server.requests) == 3
    server.fail_next(429, 429, 429, retry_after="0")
    with pytest.raises(RateLimitError):
        emb.embed(["rate limited"])
    with pytest.raises(AuthenticationError):
        make(server, api_key="wrong").embed(["bad key"])


def test_timeout_raises_provider_timeout(server: FakeServer) -> None:
    emb = make(server, timeout=0.2, max_retries=0)
    server.enqueue(Reply(delay=1.0))
    with pytest.raises(ProviderTimeoutError):
        emb.embed(["slow"])


async def test_async_twin(server: FakeServer) -> None:
    emb = make(server, batch_size=3)
    texts = [f"async text {i}" for i in range(7)]
    np.testing.assert_allclose(await emb.aembed(texts), _hash.embed(texts), atol=1e-6)
    assert len(server.requests) == 3
    await emb.aclose()


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        OpenAIEmbedder()  # api.openai.com without a key: refused before any request
    with pytest.raises(ConfigError, match="dimensions"):
        OpenAIEmbedder("nomic-embed-text", base_url=server.openai_url)
    with pytest.raises(ConfigError, match="encoding_format"):
        make(server, encoding_format="int8")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    emb = get_embedder("openai/text-embedding-3-small", dimensions=DIM)
    assert isinstance(emb, OpenAIEmbedder) and emb.embed(["from env"]).shape == (1, DIM)
    assert server.requests[-1].headers.get("authorization") == "Bearer sk-test"


def test_working_memory_over_http_with_a_slow_server(server: FakeServer) -> None:
    emb = make(server, timeout=5.0, max_retries=0)
    with WorkingMemory(embedder=emb, fifo_interval_min=None, embed_timeout=0.3) as memory:
        memory.add("fast item", user_id="u")
        server.enqueue(Reply(delay=2.0))
        with pytest.raises(ProviderTimeoutError):
            memory.add("slow item", user_id="u")
        server.fail_next(500)
        with pytest.raises(ProviderError):
            memory.add("failing item", user_id="u")
        assert [i.content for i in memory.search("item", k=5, user_id="u")] == ["fast item"]
    assert math.isclose(float(np.linalg.norm(emb.embed(["fast item"]))), 1.0, rel_tol=1e-6)


def test_errors_say_whether_the_service_or_the_input_is_at_fault(server: FakeServer) -> None:
    """Unavailable (refused, 5xx, 429, timeout: background work waits) or refused input."""
    from tiermem.errors import ProviderServerError, ProviderUnavailableError

    emb = make(server, max_retries=0)
    server.fail_next(503)
    with pytest.raises(ProviderServerError, match="HTTP 503") as down:
        emb.embed(["overloaded"])
    assert isinstance(down.value, ProviderResponseError)
    server.fail_next(400)
    with pytest.raises(ProviderResponseError, match="HTTP 400") as refused:
        emb.embed(["refused input"])
    assert not isinstance(refused.value, ProviderUnavailableError)
    assert issubclass(RateLimitError, ProviderUnavailableError)
    assert issubclass(ProviderTimeoutError, ProviderUnavailableError)
    server.stop()
    with pytest.raises(ProviderUnavailableError, match="cannot reach"):
        emb.embed(["nobody listens"])
