"""The second stage's guard and settings: CircuitBreaker, rerank_scores / arerank_scores
with any Reranker, blend, and memory.rerank in the configuration."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tiermem.clock import ManualClock
from tiermem.config.model import MASK, RerankConfig, TiermemConfig, check_config
from tiermem.errors import ConfigError, InvalidSizeError, InvalidTypeError, ProviderResponseError
from tiermem.rerank import (
    BaseReranker,
    CircuitBreaker,
    Reranker,
    arerank_scores,
    blend,
    get_reranker,
    parse_spec,
    rerank_scores,
)

DOCS = ["alpha beta", "gamma", "beta"]


class Words:
    """A Reranker by the protocol alone: the share of the query's words a document holds."""

    model_id = "test/words"

    def __init__(self) -> None:
        self.calls = 0

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        words = set(query.split())
        return [len(words & set(d.split())) / len(words) for d in documents]

    async def arerank(self, query: str, documents: Sequence[str]) -> list[float]:
        return self.rerank(query, documents)


class Broken(BaseReranker):
    """Answers what it is told to: a wrong count, an exception, a wait."""

    model_id = "test/broken"

    def __init__(self, answer: object = None, error: Exception | None = None, wait: float = 0):
        self.answer, self.error, self.wait = answer, error, wait
        self.release = threading.Event()

    def _scores(self, query: str, documents: list[str]) -> Sequence[float]:
        if self.wait:
            self.release.wait(self.wait)
        if self.error is not None:
            raise self.error
        return self.answer  # type: ignore[return-value]


def test_a_protocol_only_reranker_is_used_as_is() -> None:
    words = Words()
    assert isinstance(words, Reranker) and get_reranker(words) is words
    assert rerank_scores(words, "alpha beta", DOCS) == [1.0, 0.0, 0.5]
    assert asyncio.run(arerank_scores(words, "alpha beta", DOCS)) == [1.0, 0.0, 0.5]


def test_no_reranker_and_no_documents_cost_nothing() -> None:
    words = Words()
    assert rerank_scores(None, "q", DOCS) is None
    assert rerank_scores(words, "q", []) == []
    assert asyncio.run(arerank_scores(None, "q", DOCS)) is None
    assert words.calls == 0


def test_the_callers_mistakes_raise() -> None:
    with pytest.raises(InvalidTypeError, match="query"):
        rerank_scores(Words(), None, DOCS)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="documents"):
        rerank_scores(Words(), "q", "one string")
    with pytest.raises(InvalidTypeError, match=r"documents\[1\]"):
        rerank_scores(Words(), "q", ["a", 2])  # type: ignore[list-item]
    with pytest.raises(InvalidSizeError, match="timeout"):
        rerank_scores(Words(), "q", DOCS, timeout=0)


@pytest.mark.parametrize(
    "broken",
    [
        Broken(answer=[0.5]),  # a wrong count
        Broken(answer=[0.5, float("nan"), 0.1]),
        Broken(answer="0.5 0.1 0.2"),
        Broken(error=ProviderResponseError("bad")),
        Broken(error=RuntimeError("a bug in a user's reranker")),
    ],
)
def test_any_failure_of_the_model_gives_none(
    broken: Broken, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tiermem.rerank"):
        assert rerank_scores(broken, "q", DOCS, breaker=CircuitBreaker()) is None
        assert asyncio.run(arerank_scores(broken, "q", DOCS, breaker=CircuitBreaker())) is None
    assert "test/broken failed" in caplog.text
    with pytest.raises(ProviderResponseError if broken.error is None else type(broken.error)):
        broken.rerank("q", DOCS)  # the reranker itself raises: only rerank_scores says None


def test_a_slow_reranker_is_left_behind_within_the_timeout() -> None:
    slow = Broken(answer=[0.1, 0.2, 0.3], wait=30)
    started = time.monotonic()
    assert rerank_scores(slow, "q", DOCS, timeout=0.2, breaker=CircuitBreaker()) is None
    assert time.monotonic() - started < 2.0

    async def late() -> tuple[list[float] | None, float]:
        started = time.monotonic()
        scores = await arerank_scores(slow, "q", DOCS, timeout=0.2, breaker=CircuitBreaker())
        elapsed = time.monotonic() - started
        slow.release.set()  # else asyncio.run waits for the thread at the loop's close
        return scores, elapsed

    scores, elapsed = asyncio.run(late())
    assert scores is None and elapsed < 2.0


def test_the_breaker_opens_after_three_failures_and_a_probe_decides() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(clock=clock)
    assert breaker.state == "closed"
    assert [breaker.failure() for _ in range(3)] == [False, False, True]
    assert breaker.state == "open" and not breaker.allow()
    clock.advance(30)
    assert breaker.state == "half-open"
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # only one at a time
    breaker.abandon()  # it never ran: the next caller probes
    assert breaker.allow()
    breaker.success()
    assert breaker.state == "closed" and breaker.allow()
    assert breaker.failure() is False  # counting starts again


def test_one_probe_among_many_threads() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=1, cooldown=5, clock=clock)
    breaker.failure()
    clock.advance(5)
    allowed: list[bool] = []
    threads = [threading.Thread(target=lambda: allowed.append(breaker.allow())) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert allowed.count(True) == 1


def test_the_breaker_skips_the_model_while_open() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(clock=clock)
    broken = Broken(error=ProviderResponseError("down"))
    for _ in range(3):
        assert rerank_scores(broken, "q", DOCS, breaker=breaker) is None
    words = Words()  # the same breaker guarding a model that works: skipped all the same
    assert rerank_scores(words, "alpha", DOCS, breaker=breaker) is None and words.calls == 0
    clock.advance(30)
    assert rerank_scores(words, "alpha", DOCS, breaker=breaker) == [1.0, 0.0, 0.0]
    assert breaker.state == "closed"


def test_bad_breaker_settings() -> None:
    with pytest.raises(InvalidSizeError):
        CircuitBreaker(failures=0)
    with pytest.raises(InvalidSizeError):
        CircuitBreaker(cooldown=-1)


def test_blend() -> None:
    relevance = [1.0, 0.5, 0.2]
    assert blend(relevance, None, 1.0) == relevance
    assert blend(relevance, [0.0, 1.0, 0.4], 1.0) == [0.0, 1.0, 0.4]
    assert blend(relevance, [0.0, 1.0, 0.4], 0.0) == relevance
    assert blend(relevance, [0.0, 1.0, 0.4], 0.5) == pytest.approx([0.5, 0.75, 0.3])
    with pytest.raises(InvalidSizeError):
        blend(relevance, [1.0], 0.5)
    with pytest.raises(InvalidSizeError):
        blend(relevance, [1.0, 1.0, 1.0], 1.5)


def test_parse_spec() -> None:
    assert parse_spec("onnx:/models/ms-marco").target == "/models/ms-marco"
    assert parse_spec("onnx/models/ms-marco").target == "models/ms-marco"
    assert parse_spec("Cohere/rerank-v3.5") == parse_spec("cohere:rerank-v3.5")
    assert parse_spec("tei:http://127.0.0.1:8080").target == "http://127.0.0.1:8080"
    assert parse_spec("llm").target == "" and parse_spec("llm:openai/gpt-4o-mini").provider == "llm"


# -- memory.rerank ---------------------------------------------------------------------------


def test_off_by_default() -> None:
    settings = TiermemConfig().memory.rerank
    assert settings == RerankConfig()
    assert settings.provider is None and not settings.enabled
    assert (settings.top_n, settings.weight, settings.timeout) == (30, 1.0, 2.0)
    assert TiermemConfig.load("memory:\n  rerank:\n").memory.rerank == settings


def test_yaml_and_environment(tmp_path: Path) -> None:
    yaml = """
memory:
  rerank:
    provider: ${RERANKER:-cohere/rerank-v3.5}
    top_n: 50
    weight: 0.7
    timeout: 1.5
    api_key: ${{ secrets.COHERE_API_KEY }}
"""
    config = TiermemConfig.load(yaml, environ={"COHERE_API_KEY": "co-secret-123"})
    settings = config.memory.rerank
    assert settings.enabled and settings.provider == "cohere/rerank-v3.5"
    assert (settings.top_n, settings.weight, settings.timeout) == (50, 0.7, 1.5)
    assert settings.provider_options() == {
        "timeout": 1.5,
        "max_retries": 1,
        "api_key": "co-secret-123",
    }
    assert "co-secret-123" not in repr(config)
    other = TiermemConfig.load(yaml, environ={"COHERE_API_KEY": "k", "RERANKER": "voyage/rerank-2"})
    assert other.memory.rerank.provider == "voyage/rerank-2"
    file = tmp_path / "c.yaml"
    file.write_text(yaml)
    rows = dict(check_config(file, environ={"COHERE_API_KEY": "co-secret-123"}))
    assert rows["memory.rerank.api_key"] == MASK
    assert rows["memory.rerank.provider"] == "cohere/rerank-v3.5"


def test_tei_url_from_the_spec_or_base_url() -> None:
    spec = TiermemConfig.load({"memory": {"rerank": {"provider": "tei:http://10.0.0.5:8080"}}})
    assert spec.memory.rerank.provider_options() == {"timeout": 2.0, "max_retries": 1}
    given = {"provider": "tei", "base_url": "http://10.0.0.5:8080"}
    options = TiermemConfig.load({"memory": {"rerank": given}}).memory.rerank.provider_options()
    assert options["base_url"] == "http://10.0.0.5:8080"
    assert get_reranker("tei", **options).model_id == "tei/http://10.0.0.5:8080"


@pytest.mark.parametrize(
    ("rerank", "field", "needle"),
    [
        ({"provider": "bge/base"}, "memory.rerank.provider", "does not name a reranker"),
        ({"provider": "cohere"}, "memory.rerank.provider", "names no model"),
        ({"provider": "tei"}, "memory.rerank", "tei needs the URL"),
        ({"provider": "llm/gemini/pro"}, "memory.rerank.provider", "not a chat model"),
        ({"top_n": 0}, "memory.rerank.top_n", "greater than 0"),
        ({"weight": 1.5}, "memory.rerank.weight", "less than or equal to 1"),
        ({"timeout": 0}, "memory.rerank.timeout", "greater than 0"),
        ({"top_k": 5}, "memory.rerank.top_k", "did you mean 'top_n'"),
    ],
)
def test_bad_settings_name_the_key(rerank: dict[str, object], field: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        TiermemConfig.load({"memory": {"rerank": rerank}})
    assert info.value.field == field and needle in str(info.value)


def test_the_yaml_of_docs_rerank_loads() -> None:
    import re

    page = Path(__file__).parents[1] / "docs" / "rerank.md"
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)
    assert blocks
    for block in blocks:
        settings = TiermemConfig.load(block, environ={"COHERE_API_KEY": "k"}).memory.rerank
        assert settings.enabled and settings.provider == "cohere/rerank-v3.5"


def test_a_reranker_breaking_the_protocol_gives_none() -> None:
    class NotAsync(Words):
        def arerank(self, query: str, documents: Sequence[str]) -> list[float]:  # type: ignore[override]
            return self.rerank(query, documents)

    assert asyncio.run(arerank_scores(NotAsync(), "q", DOCS, breaker=CircuitBreaker())) is None
