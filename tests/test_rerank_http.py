"""The ``/rerank`` APIs (Cohere, Jina, Voyage, text-embeddings-inference) over real HTTP
against tests/fakeserver.py taught their routes, and :func:`rerank_scores` around them:
typed errors, a time limit, the circuit breaker."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

import fakeserver
from fakeserver import FakeServer, Refusal, Reply
from tiermem.clock import ManualClock
from tiermem.errors import (
    AuthenticationError,
    ConfigError,
    InputError,
    ProviderResponseError,
    ProviderServerError,
    ProviderUnavailableError,
)
from tiermem.rerank import (
    CircuitBreaker,
    HTTPReranker,
    arerank_scores,
    breaker_for,
    get_reranker,
    rerank_scores,
)

QUERY = "where did Melanie paint the sunrise"
DOCS = [
    "We had pizza on Friday.",
    "Melanie painted the sunrise at the lake last week.",
    "The sunrise was red.",
]
KEY = "rr-test-key"
MODELS = {
    "cohere": "rerank-v3.5",
    "jina": "jina-reranker-v2-base-multilingual",
    "voyage": "rerank-2",
}
APIS = ["cohere", "jina", "voyage", "tei"]
FIELDS = {
    "cohere": {"model", "query", "documents", "top_n", "max_tokens_per_doc"},
    "jina": {"model", "query", "documents", "top_n", "return_documents"},
    "voyage": {"model", "query", "documents", "top_k", "return_documents", "truncation"},
    "tei": {"query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction"},
}


def relevance(query: str, document: str) -> float:
    """The fake model: the share of the query's words the document holds."""
    words = set(query.lower().split())
    return len(words & set(document.lower().rstrip(".").split())) / len(words)


def _ranked(api: str, body: dict[str, Any], texts_field: str) -> list[tuple[int, float]]:
    unknown = set(body) - FIELDS[api]
    if unknown:
        raise Refusal(400, f"unknown field(s) {sorted(unknown)} for {api}")
    texts = body[texts_field]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise Refusal(400, f"{texts_field} must be a list of strings")
    scored = [(i, relevance(body["query"], t)) for i, t in enumerate(texts)]
    return sorted(scored, key=lambda pair: -pair[1])


def _cohere(fake: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    ranked = _ranked("cohere", body, "documents")[: body.get("top_n") or None]
    return {
        "id": "rr-1",
        "results": [{"index": i, "relevance_score": s} for i, s in ranked],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    }


def _v1(fake: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    """Jina and Voyage share the path; the test says which one the server is."""
    api = getattr(fake, "rerank_api", "jina")
    if api == "voyage":
        ranked = _ranked("voyage", body, "documents")[: body.get("top_k") or None]
        return {
            "object": "list",
            "data": [{"index": i, "relevance_score": s} for i, s in ranked],
            "model": body["model"],
            "usage": {"total_tokens": 42},
        }
    ranked = _ranked("jina", body, "documents")[: body.get("top_n") or None]
    results = []
    for i, s in ranked:
        item: dict[str, Any] = {"index": i, "relevance_score": s}
        if body.get("return_documents", True):
            item["document"] = {"text": body["documents"][i]}
        results.append(item)
    return {"model": body["model"], "usage": {"total_tokens": 42}, "results": results}


def _tei(fake: FakeServer, body: dict[str, Any]) -> Any:
    return [{"index": i, "score": s} for i, s in _ranked("tei", body, "texts")]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """The fake server with the rerank routes, requiring KEY as a bearer token."""
    routes = {"/v2/rerank": _cohere, "/v1/rerank": _v1, "/rerank": _tei}
    required = {
        "/v2/rerank": ("model", "query", "documents"),
        "/v1/rerank": ("model", "query", "documents"),
        "/rerank": ("query", "texts"),
    }
    for path, build in routes.items():
        monkeypatch.setitem(fakeserver._ROUTES, path, ("openai", build))
        monkeypatch.setitem(fakeserver._REQUIRED, path, required[path])
    with FakeServer(api_key=KEY) as fake:
        yield fake


def make(api: str, server: FakeServer, **kw: Any) -> HTTPReranker:
    server.rerank_api = api  # type: ignore[attr-defined]
    opts: dict[str, Any] = {"api_key": KEY, "base_url": server.url, "backoff": 0.01}
    opts.update(kw)
    return HTTPReranker(api, MODELS.get(api), **opts)


EXPECTED = [relevance(QUERY, d) for d in DOCS]


# -- each protocol -----------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_each_api_scores_in_input_order(api: str, server: FakeServer) -> None:
    reranker = make(api, server)
    assert reranker.rerank(QUERY, DOCS) == pytest.approx(EXPECTED)
    assert EXPECTED[1] > EXPECTED[2] > EXPECTED[0]  # the answers came back ranked, not in order
    request = server.requests[-1]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json
    assert body["query"] == QUERY
    if api == "tei":
        assert request.path == "/rerank"
        assert body == {"query": QUERY, "texts": DOCS, "raw_scores": False, "truncate": True}
    else:
        assert request.path == ("/v2/rerank" if api == "cohere" else "/v1/rerank")
        assert body["model"] == MODELS[api] and body["documents"] == DOCS
        assert body["top_k" if api == "voyage" else "top_n"] == len(DOCS)
    assert reranker.model_id == (f"tei/{server.url}" if api == "tei" else f"{api}/{MODELS[api]}")


@pytest.mark.parametrize("api", APIS)
async def test_each_api_async(api: str, server: FakeServer) -> None:
    reranker = make(api, server)
    got = await asyncio.gather(*(reranker.arerank(QUERY, DOCS) for _ in range(3)))
    assert all(g == pytest.approx(EXPECTED) for g in got)
    assert len(server.requests) == 3
    await reranker.aclose()


def test_no_documents_makes_no_call(server: FakeServer) -> None:
    assert make("cohere", server).rerank(QUERY, []) == []
    assert rerank_scores(make("tei", server), QUERY, []) == []
    assert server.requests == []


def test_a_document_the_answer_leaves_out_scores_zero(server: FakeServer) -> None:
    server.enqueue(Reply(body=b'{"results": [{"index": 1, "relevance_score": 0.9}]}'))
    assert make("cohere", server).rerank(QUERY, DOCS) == [0.0, 0.9, 0.0]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"nothing": []}',
        b'{"results": [{"index": 7, "relevance_score": 0.5}]}',
        b'{"results": [{"index": 0, "relevance_score": "high"}]}',
        b'{"results": ["x"]}',
        b"[1, 2",
    ],
)
def test_an_unreadable_answer_is_a_response_error(server: FakeServer, raw: bytes) -> None:
    server.enqueue(Reply(body=raw))
    with pytest.raises(ProviderResponseError):
        make("cohere", server).rerank(QUERY, DOCS)


def test_extra_request_fields_are_sent_and_reserved_ones_refused(server: FakeServer) -> None:
    make("cohere", server, max_tokens_per_doc=512).rerank(QUERY, DOCS)
    assert server.requests[-1].json["max_tokens_per_doc"] == 512
    with pytest.raises(InputError, match="top_k"):
        make("voyage", server, top_k=1)


def test_the_fake_refuses_a_field_its_api_does_not_know(server: FakeServer) -> None:
    """The fake is strict, so the shapes above are the APIs' own (Voyage has no top_n)."""
    voyage_with_top_n = make("jina", server)
    server.rerank_api = "voyage"  # type: ignore[attr-defined]
    with pytest.raises(ProviderResponseError, match="HTTP 400"):
        voyage_with_top_n.rerank(QUERY, DOCS)


# -- keys ------------------------------------------------------------------------------


def test_key_from_the_environment(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for api, env in (
        ("cohere", "CO_API_KEY"),
        ("jina", "JINA_API_KEY"),
        ("voyage", "VOYAGE_API_KEY"),
    ):
        monkeypatch.delenv("COHERE_API_KEY", raising=False)
        monkeypatch.setenv(env, KEY)
        assert make(api, server, api_key=None).rerank(QUERY, DOCS) == pytest.approx(EXPECTED)
        assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_no_key_for_the_service_host_is_an_authentication_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for env in ("COHERE_API_KEY", "CO_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    reranker = HTTPReranker("cohere", "rerank-v3.5")  # api.cohere.com: never contacted
    with pytest.raises(AuthenticationError, match="COHERE_API_KEY"):
        reranker.rerank(QUERY, DOCS)


def test_a_rejected_key_is_an_authentication_error(server: FakeServer) -> None:
    with pytest.raises(AuthenticationError, match="401"):
        make("voyage", server, api_key="wrong").rerank(QUERY, DOCS)
    assert len(server.requests) == 1  # not retried


# -- failures --------------------------------------------------------------------------


def test_500_is_retried_then_a_typed_error_and_none_from_rerank_scores(
    server: FakeServer,
) -> None:
    server.fail_next(500, 500)
    reranker = make("cohere", server, max_retries=1)
    with pytest.raises(ProviderServerError, match="HTTP 500") as info:
        reranker.rerank(QUERY, DOCS)
    assert isinstance(info.value, ProviderUnavailableError)
    assert len(server.requests) == 2
    server.fail_next(500, 500)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=CircuitBreaker()) is None
    server.fail_next(503)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=CircuitBreaker()) == pytest.approx(
        EXPECTED
    )  # one retry got through


def test_400_is_a_typed_error_not_retried(server: FakeServer) -> None:
    server.fail_next(400)
    reranker = make("tei", server, max_retries=3)
    with pytest.raises(ProviderResponseError, match="HTTP 400") as info:
        reranker.rerank(QUERY, DOCS)
    assert not isinstance(info.value, ProviderUnavailableError)
    assert len(server.requests) == 1
    server.fail_next(400)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=CircuitBreaker()) is None


def test_a_hanging_server_gives_none_within_the_timeout(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.delay = 60.0  # answered only when the server stops
    reranker = make("jina", server, timeout=30.0, max_retries=0)  # its own timeout is long
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tiermem.rerank"):
        assert rerank_scores(reranker, QUERY, DOCS, timeout=0.3) is None
    assert time.monotonic() - started < 2.0  # the 0.3 s limit, not the 30 s one
    assert "no answer within 0.3s" in caplog.text
    assert len(server.requests) == 1 and server.answered == 0


async def test_a_hanging_server_gives_none_within_the_timeout_async(server: FakeServer) -> None:
    server.delay = 60.0
    reranker = make("voyage", server, timeout=30.0, max_retries=0)
    started = time.monotonic()
    assert await arerank_scores(reranker, QUERY, DOCS, timeout=0.3) is None
    assert time.monotonic() - started < 2.0
    server.delay = 0.0
    assert await arerank_scores(reranker, QUERY, DOCS, timeout=5) == pytest.approx(EXPECTED)


def test_a_refused_connection_gives_none(server: FakeServer) -> None:
    reranker = make("tei", server, max_retries=0)
    server.stop()
    assert rerank_scores(reranker, QUERY, DOCS, timeout=5, breaker=CircuitBreaker()) is None
    server.start()
    assert rerank_scores(reranker, QUERY, DOCS, timeout=5, breaker=CircuitBreaker()) is not None


# -- the circuit breaker ------------------------------------------------------------------


@pytest.mark.parametrize("run", ["sync", "async"])
def test_three_failures_open_the_breaker_then_a_probe_decides(server: FakeServer, run: str) -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=3, cooldown=30.0, clock=clock)
    reranker = make("cohere", server, max_retries=0)

    def scores() -> list[float] | None:
        if run == "sync":
            return rerank_scores(reranker, QUERY, DOCS, timeout=5, breaker=breaker)
        return asyncio.run(arerank_scores(reranker, QUERY, DOCS, timeout=5, breaker=breaker))

    server.outage_status = 500
    assert [scores() for _ in range(3)] == [None, None, None]
    assert len(server.requests) == 3 and breaker.state == "open"
    server.outage_status = None  # the model is back, but nobody asks it yet
    clock.advance(29.0)
    assert scores() is None and scores() is None
    assert len(server.requests) == 3  # no call during the cool-down
    clock.advance(1.0)
    assert breaker.state == "half-open"
    assert scores() == pytest.approx(EXPECTED)  # the probe
    assert len(server.requests) == 4 and breaker.state == "closed"
    assert scores() == pytest.approx(EXPECTED)  # used again
    assert len(server.requests) == 5


def test_a_failed_probe_opens_the_breaker_for_another_cool_down(server: FakeServer) -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(clock=clock)
    reranker = make("tei", server, max_retries=0)
    server.outage_status = 503
    for _ in range(3):
        assert rerank_scores(reranker, QUERY, DOCS, breaker=breaker) is None
    clock.advance(30.0)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=breaker) is None  # the probe fails
    assert len(server.requests) == 4 and breaker.state == "open"
    clock.advance(10.0)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=breaker) is None
    assert len(server.requests) == 4
    server.outage_status = None
    clock.advance(20.0)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=breaker) == pytest.approx(EXPECTED)


def test_each_reranker_has_its_own_default_breaker(server: FakeServer) -> None:
    one, two = make("cohere", server), make("cohere", server)
    assert breaker_for(one) is breaker_for(one) is not breaker_for(two)
    assert breaker_for(one).failures == 3 and breaker_for(one).cooldown == 30.0


# -- get_reranker ------------------------------------------------------------------------


def test_get_reranker_builds_each_http_api(server: FakeServer) -> None:
    for spec, model_id in (
        ("cohere/rerank-v3.5", "cohere/rerank-v3.5"),
        ("jina/jina-reranker-v2-base-multilingual", "jina/jina-reranker-v2-base-multilingual"),
        ("voyage:rerank-2", "voyage/rerank-2"),
        (f"tei:{server.url}", f"tei/{server.url}"),
    ):
        reranker = get_reranker(spec, api_key=KEY, base_url=server.url)
        assert isinstance(reranker, HTTPReranker) and reranker.model_id == model_id
        server.rerank_api = reranker.provider  # type: ignore[attr-defined]
        assert reranker.rerank(QUERY, DOCS) == pytest.approx(EXPECTED)
    tei = get_reranker("tei", base_url=server.url, api_key=KEY)
    assert tei.rerank(QUERY, DOCS) == pytest.approx(EXPECTED)
    assert get_reranker(tei) is tei


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("", "not a reranker spec"),
        ("bge/reranker", "does not name a reranker"),
        ("cohere", "names no model"),
        ("jina/", "names no model"),
        ("onnx:", "names no folder"),
        ("tei", "needs the URL"),
        ("tei:127.0.0.1:8080", "not an http(s) URL"),
        ("llm", "none is configured"),
        ("llm/mistral/large", "not a chat model"),
    ],
)
def test_bad_specs_are_config_errors(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        get_reranker(spec)
    assert needle in str(info.value)
    with pytest.raises(ConfigError):
        get_reranker(42)  # type: ignore[arg-type]
