"""LLMReranker through tiermem's LLM protocol, against the local OpenAI-protocol server of
tests/test_llm_http.py: one prompt, lenient reading of the answer, typed errors when the
model is down."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from fakeserver import FakeServer
from tiermem.errors import ProviderTimeoutError, ProviderUnavailableError
from tiermem.llm import OpenAIModel
from tiermem.rerank import CircuitBreaker, LLMReranker, get_reranker, parse_scores, rerank_scores

QUERY = "Where did Melanie paint the sunrise?"
DOCS = ["We had pizza.", "Melanie painted the sunrise at the lake.", "The sunrise was red."]


def model(server: FakeServer, **kw: Any) -> OpenAIModel:
    opts: dict[str, Any] = {"api_key": "k", "timeout": 2.0, "backoff": 0.01, "max_retries": 0}
    opts.update(kw)
    return OpenAIModel("gpt-4o-mini", base_url=server.openai_url, **opts)


def answering(text: str) -> Any:
    return lambda body: text


def test_one_prompt_lists_the_numbered_passages(fake_server: FakeServer) -> None:
    fake_server.chat_reply = answering("[1, 9, 4]")
    reranker = LLMReranker(model(fake_server), temperature=0)
    assert reranker.rerank(QUERY, DOCS) == pytest.approx([0.1, 0.9, 0.4])
    assert len(fake_server.requests) == 1
    body = fake_server.requests[0].json
    assert body["temperature"] == 0 and body["model"] == "gpt-4o-mini"
    prompt = body["messages"][-1]["content"]
    assert f"Query: {QUERY}" in prompt
    for i, doc in enumerate(DOCS, 1):
        assert f"[{i}] {doc}" in prompt
    assert "JSON list of 3 numbers" in prompt
    assert reranker.model_id == "llm/openai/gpt-4o-mini"


def test_long_passages_are_cut_in_the_prompt(fake_server: FakeServer) -> None:
    fake_server.chat_reply = answering("[5]")
    LLMReranker(model(fake_server), max_chars=50).rerank(QUERY, ["word " * 100])
    prompt = fake_server.requests[0].json["messages"][-1]["content"]
    assert "word " * 9 in prompt and "word " * 11 not in prompt and "…" in prompt


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("[2, 9, 5]", [0.2, 0.9, 0.5]),
        ("```json\n[2, 9, 5]\n```", [0.2, 0.9, 0.5]),
        ("Sure! Here are the scores: [2, 9, 5]. Passage 2 answers it.", [0.2, 0.9, 0.5]),
        ("[2, 9, 5", [0.2, 0.9, 0.5]),  # cut off
        ('{"scores": [2, 9, 5]}', [0.2, 0.9, 0.5]),
        ('{"1": 2, "2": 9, "3": 5}', [0.2, 0.9, 0.5]),
        ('{"scores": {"2": 9}}', [0.0, 0.9, 0.0]),
        ('[{"index": 2, "score": 9}, {"index": 1, "score": 2}]', [0.2, 0.9, 0.0]),
        ("1: 2\n2: 9\n3: 5", [0.2, 0.9, 0.5]),
        ("[1] 2/10\n[2] 9/10\n[3] 5/10", [0.2, 0.9, 0.5]),
        ("Passage 3 - 5\nPassage 2 - 9", [0.0, 0.9, 0.5]),
        ("0: 2\n1: 9\n2: 5", [0.2, 0.9, 0.5]),  # counted from 0
        ("<think>1 is off, 3 is close</think>\n[2, 9, 5]", [0.2, 0.9, 0.5]),
        ("[2, 9]", [0.2, 0.9, 0.0]),  # a missing score is 0
        ("[2, 9, 5, 7, 7]", [0.2, 0.9, 0.5]),  # extra ones are dropped
        ("[12, -3, 5.5]", [1.0, 0.0, 0.55]),  # kept within 0-10
        ('["2", "9/10", "high"]', [0.2, 0.9, 0.0]),
        ("[NaN, 9, 5]", [0.0, 0.9, 0.5]),
        ("Scores: 2, 9, 5", [0.2, 0.9, 0.5]),
        ("I cannot rate these passages.", [0.0, 0.0, 0.0]),
        ("", [0.0, 0.0, 0.0]),
    ],
)
def test_a_sloppy_answer_is_read_never_raised(
    fake_server: FakeServer, answer: str, expected: list[float]
) -> None:
    fake_server.chat_reply = answering(answer)
    assert LLMReranker(model(fake_server)).rerank(QUERY, DOCS) == pytest.approx(expected)
    assert parse_scores(answer, 3) == pytest.approx(expected)


async def test_async_twin(fake_server: FakeServer) -> None:
    fake_server.chat_reply = answering("[3, 8, 1]")
    reranker = LLMReranker(model(fake_server))
    assert await reranker.arerank(QUERY, DOCS) == pytest.approx([0.3, 0.8, 0.1])
    assert await reranker.arerank(QUERY, []) == []
    assert len(fake_server.requests) == 1


def test_an_unavailable_model_raises_a_typed_error(fake_server: FakeServer) -> None:
    reranker = LLMReranker(model(fake_server))
    fake_server.outage_status = 503
    with pytest.raises(ProviderUnavailableError, match="503"):
        reranker.rerank(QUERY, DOCS)
    assert rerank_scores(reranker, QUERY, DOCS, breaker=CircuitBreaker()) is None
    fake_server.outage_status = None
    fake_server.delay = 60.0
    with pytest.raises(ProviderTimeoutError):
        LLMReranker(model(fake_server, timeout=0.2)).rerank(QUERY, DOCS)


def test_an_unreachable_model_raises_a_typed_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ProviderUnavailableError, match="cannot reach"):
        LLMReranker(llm).rerank(QUERY, DOCS)


def test_get_reranker_llm_uses_the_given_or_named_chat_model(fake_server: FakeServer) -> None:
    fake_server.chat_reply = answering("[0, 10, 5]")
    configured = model(fake_server)
    reranker = get_reranker("llm", llm=configured, timeout=5, api_key="ignored")
    assert isinstance(reranker, LLMReranker) and reranker.llm is configured
    assert reranker.rerank(QUERY, DOCS) == [0.0, 1.0, 0.5]
    named = get_reranker("llm/openai/gpt-4o-mini", base_url=fake_server.openai_url, api_key="k")
    assert isinstance(named, LLMReranker) and named.model_id == "llm/openai/gpt-4o-mini"
    assert named.rerank(QUERY, DOCS) == [0.0, 1.0, 0.5]
    assert fake_server.requests[-1].headers["authorization"] == "Bearer k"
