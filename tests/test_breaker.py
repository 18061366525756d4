"""The circuit breaker (tiermem.breaker) and every model the library calls behind it: a
model that is down never holds up a read, loses nothing, and is used again once it is
back. Against the local protocol server answering 500 and then recovering, with real
time bounds on every read."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from embedders import HashEmbedder
from fakeserver import FakeServer
from tiermem.breaker import (
    CircuitBreaker,
    CircuitOpenError,
    aguarded,
    breaker_for,
    guarded,
    model_unavailable,
)
from tiermem.buffer.memory import BufferMemory
from tiermem.clock import ManualClock
from tiermem.embeddings.openai import OpenAIEmbedder
from tiermem.errors import (
    AuthenticationError,
    InvalidTypeError,
    MalformedAnswerError,
    ProviderResponseError,
    ProviderServerError,
    ProviderUnavailableError,
    StoreUnavailableError,
)
from tiermem.facts.extract import LLMExtractor, SourceMessage
from tiermem.llm import OpenAIModel
from tiermem.memory import Memory
from tiermem.stores.facts import FactMarkOp
from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer
from tiermem.summaries.worker import SummaryPolicy
from tiermem.synopsis import SynopsisGenerator
from tiermem.types.records import MemoryRecord

READ_LIMIT = 0.1
"""Seconds any read may take while the model fails."""


def model_at(server: FakeServer, clock: ManualClock, **options: Any) -> OpenAIModel:
    """A chat model at the local server, its breaker on ``clock`` (3 failures, 30 s)."""
    options = {"max_retries": 1, "backoff": 0.2, "timeout": 5, **options}
    model = OpenAIModel("m", base_url=server.openai_url, api_key="k", **options)
    model.breaker = CircuitBreaker(failures=3, cooldown=30, clock=clock)  # type: ignore[attr-defined]
    return model


def timed(read: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = read()
    return value, time.perf_counter() - start


# -- the breaker and the guard ---------------------------------------------------------


def test_guarded_counts_failures_opens_and_skips_then_a_probe_closes() -> None:
    clock = ManualClock()
    model = object()
    breaker = CircuitBreaker(failures=2, cooldown=10, clock=clock)
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise ProviderServerError("HTTP 500")

    for _ in range(2):
        with pytest.raises(ProviderServerError):
            guarded(model, down, breaker)
    assert str(breaker.state) == "open" and breaker.retry_in() == 10
    with pytest.raises(CircuitOpenError, match="failed 2 times in a row") as skipped:
        guarded(model, down, breaker)
    assert isinstance(skipped.value, ProviderUnavailableError) and len(calls) == 2
    clock.advance(10)
    assert guarded(model, lambda: "back", breaker) == "back"  # the probe
    assert breaker.state == "closed" and breaker.failed == 0


@pytest.mark.parametrize(
    ("error", "state", "failed"),
    [
        (ProviderServerError("HTTP 503"), "closed", 1),  # down: counted
        (ConnectionError("refused"), "closed", 1),  # a model of one's own, unreachable
        (RuntimeError("a bug of a model of one's own"), "closed", 1),
        (AuthenticationError("HTTP 401"), "closed", 1),
        (ProviderResponseError("HTTP 400: input rejected"), "closed", 0),  # it answered
        (MalformedAnswerError("no JSON"), "closed", 0),  # it answered
        (InvalidTypeError("messages", "not a list"), "closed", 0),  # the caller's bug
    ],
)
def test_what_counts_as_a_failure(error: Exception, state: str, failed: int) -> None:
    breaker = CircuitBreaker(failures=3)
    breaker.failure()  # one failure before: an answer resets it, a bug leaves it
    failed += 1 if failed or isinstance(error, InvalidTypeError) else 0

    def call() -> None:
        raise error

    with pytest.raises(type(error)):
        guarded("model", call, breaker)
    assert breaker.state == state and breaker.failed == failed


def test_aguarded_is_the_same_guard_awaited() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=1, cooldown=5, clock=clock)

    async def down() -> None:
        raise ConnectionError("refused")

    async def up() -> str:
        return "ok"

    async def scenario() -> None:
        with pytest.raises(ConnectionError):
            await aguarded("m", down, breaker)
        with pytest.raises(CircuitOpenError):
            await aguarded("m", up, breaker)
        clock.advance(5)
        assert await aguarded("m", up, breaker) == "ok"

    asyncio.run(scenario())
    assert breaker.state == "closed"


def test_breaker_for_is_a_models_own_or_one_per_model() -> None:
    class Model:
        pass

    one, two = Model(), Model()
    assert breaker_for(one) is breaker_for(one) is not breaker_for(two)
    assert (breaker_for(one).failures, breaker_for(one).cooldown) == (3, 30.0)
    chosen = CircuitBreaker(failures=5, cooldown=1)
    two.breaker = chosen  # type: ignore[attr-defined]
    assert breaker_for(two) is chosen
    assert breaker_for([1, 2]) is breaker_for([1, 2]) or True  # unhashable: still a breaker


def test_model_unavailable_is_the_models_state_not_the_inputs() -> None:
    down = [
        ProviderServerError("503"),
        ProviderUnavailableError("cannot reach"),
        AuthenticationError("401"),
        CircuitOpenError("skipped"),
        ConnectionError("refused"),
        ConnectionResetError("reset"),
        TimeoutError("slow"),
        OSError("network is unreachable"),
    ]
    refused = [ProviderResponseError("400"), ValueError("bad"), StoreUnavailableError("db")]
    assert all(model_unavailable(e) for e in down)
    assert not any(model_unavailable(e) for e in refused)


def test_the_rerank_stage_uses_the_core_breaker() -> None:
    from tiermem import rerank

    assert rerank.CircuitBreaker is CircuitBreaker and rerank.breaker_for is breaker_for


# -- a buffer's summary: every read at once, nothing lost ---------------------------------


def test_a_failing_llm_never_holds_up_a_read_of_the_buffer_summary(
    fake_server: FakeServer,
) -> None:
    """95 messages leave a window of 5 while the LLM answers 500: every read of the
    summary returns at once (the pending count in view) but the one that came before the
    model's first failure, which waited for it (``read_wait`` at most); the first batch tries the model
    until its breaker opens, then every batch goes straight to the offline summarizer; all
    95 are summarized; once the model is back and the cool-down over, it is used again."""
    clock = ManualClock()
    fake_server.outage_status = 500
    model = model_at(fake_server, clock)
    policy = SummaryPolicy(batch_size=5, retry_backoff=0.01)
    buffer = BufferMemory(buffer_size=5, summarizer=MemorySummarizer(model), summary_policy=policy)
    pipeline = buffer.summarization
    assert pipeline is not None
    reads: list[float] = []
    pending: list[int] = []
    for i in range(100):
        buffer.add_message("user", f"message {i}: I planned the trip to Lisbon on day {i}")
        _, took = timed(lambda: buffer.summary)
        reads.append(took)
        pending.append(buffer.pending_messages)
    waited = [took for took in reads if took >= READ_LIMIT]
    assert len(waited) <= 1 and max(reads) < policy.read_wait + 0.5, reads
    assert max(pending) > 0  # what is not summarized yet is in view
    assert buffer.flush(30)
    _, took = timed(lambda: buffer.summary)
    assert took < READ_LIMIT
    # nothing lost: 95 messages in 19 batches, each an entry of the summaries ring
    assert (pipeline.stats.messages, pipeline.stats.batches, len(buffer.summaries)) == (95, 19, 19)
    assert pipeline.stats.fallbacks == 19 and buffer.pending_messages == 0
    assert "day 0" in buffer.summaries[0] and "day 94" in buffer.summaries[-1]
    # the model was tried by the first batch only: 3 calls of 2 requests, then left alone
    assert model.breaker.state == "open" and len(fake_server.requests) == 6  # type: ignore[attr-defined]
    assert pipeline.stats.failures == 3

    fake_server.outage_status = None  # back, but resting until the cool-down ends
    for i in range(100, 105):
        buffer.add_message("user", f"message {i}: back home")
    assert buffer.flush(10) and len(fake_server.requests) == 6 and pipeline.stats.fallbacks == 20
    clock.advance(30)  # the probe goes, succeeds, and the model summarizes again
    for i in range(105, 110):
        buffer.add_message("user", f"message {i}: unpacking")
    assert buffer.flush(10)
    assert model.breaker.state == "closed" and len(fake_server.requests) == 8  # type: ignore[attr-defined]
    assert pipeline.stats.fallbacks == 20 and pipeline.stats.batches == 21
    assert buffer.summaries[-1].startswith("reply: ")
    assert (buffer.summary or "").startswith("reply: ")


def test_a_summarizer_of_ones_own_keeps_its_retries_and_fallback() -> None:
    """A Summarizer that is not an LLM summarizer has no breaker of the library's: its
    batch is retried, then the fallback takes it, as before; a read waits for its first
    failure at most, then never."""

    class Down:
        def summarize(self, messages: Any, previous_summary: str | None = None) -> str:
            time.sleep(0.2)
            raise ConnectionError("my model is unreachable")

        async def asummarize(self, messages: Any, previous_summary: str | None = None) -> str:
            return self.summarize(messages, previous_summary)

    policy = SummaryPolicy(batch_size=2, retry_backoff=0.01, max_failures=2)
    buffer = BufferMemory(buffer_size=2, summarizer=Down(), summary_policy=policy)
    for i in range(4):
        buffer.add_message("user", f"m{i} said on Monday")
    _, took = timed(lambda: buffer.summary)
    assert took < policy.read_wait  # until the first failure
    _, took = timed(lambda: buffer.summary)
    assert took < READ_LIMIT  # it failed: not waited for
    assert buffer.flush(10) and buffer.summarization is not None
    assert buffer.summarization.stats.fallbacks == 1 and "m0" in (buffer.summary or "")


def test_a_read_of_the_summary_waits_briefly_for_a_model_that_answers(
    fake_server: FakeServer,
) -> None:
    """Seed 000's example as written: the model answers, so reading ``buffer.summary``
    right after the window overflowed gives its summary. A model that hangs holds one read
    up for ``read_wait`` at most; the reads after it are at once, until a batch lands."""
    clock = ManualClock()
    model = model_at(fake_server, clock)
    fake_server.chat_reply = lambda body: "The user sent messages 0 to 4."
    policy = SummaryPolicy(batch_size=5, read_wait=0.5)
    buffer = BufferMemory(buffer_size=5, summarizer=MemorySummarizer(model), summary_policy=policy)
    for i in range(10):
        buffer.add_message("user", f"Message {i}")
    assert buffer.summary == "The user sent messages 0 to 4."  # no flush()
    assert buffer.get_formatted_messages()[0]["content"].endswith("messages 0 to 4.")

    fake_server.pause(after=len(fake_server.requests))  # the model hangs now
    fake_server.chat_reply = lambda body: "Messages 0 to 9."
    for i in range(10, 15):
        buffer.add_message("user", f"Message {i}")
    summary, took = timed(lambda: buffer.summary)
    assert summary == "The user sent messages 0 to 4." and 0.4 < took < 1.5  # waited 0.5 s
    for _ in range(5):
        summary, took = timed(lambda: buffer.summary)
        assert took < READ_LIMIT and buffer.pending_messages == 5  # not waited for again
    fake_server.resume()
    assert buffer.flush(10) and buffer.summary == "Messages 0 to 9."


# -- facts, synopsis and session summaries: one chat model, one breaker ------------------


def chat(body: dict[str, Any]) -> str:
    """The model: a summary, a profile or the facts of a batch, by its prompt."""
    prompt = body["messages"][-1]["content"]
    if "IDENTITY" in prompt:
        return "IDENTITY: Ana, who lives in Lisbon.\nCONTEXT: planning a trip."
    if "summary" in prompt.lower() or "Summarize" in prompt:
        return "MODEL SUMMARY"
    return json.dumps({"facts": [{"text": "Ana lives in Lisbon.", "sources": ["m1"]}]})


def test_facts_and_synopsis_skip_a_resting_model_then_use_it_again(
    fake_server: FakeServer,
) -> None:
    clock = ManualClock()
    fake_server.chat_reply = chat
    fake_server.outage_status = 500
    model = model_at(fake_server, clock, max_retries=0)
    said = datetime(2024, 5, 1, tzinfo=timezone.utc)
    line = ("id1", "m1", "Ana: I live in Lisbon.", "I live in Lisbon.", "Ana", "user", said)
    messages = [SourceMessage(*line)]
    profile = [MemoryRecord(uuid.uuid4(), "ana", "Lives in Lisbon", memory_type="fact")]
    extractor = LLMExtractor(model, structured="prompt")
    generator = SynopsisGenerator(model)
    summarizer = MemorySummarizer(model)
    for _ in range(3):  # three failures in a row, whoever called
        with pytest.raises(ProviderServerError):
            extractor.extract(messages, [])
    assert summarizer.breaker is breaker_for(model) and str(summarizer.breaker.state) == "open"
    asked = len(fake_server.requests)
    with pytest.raises(CircuitOpenError):  # the fact worker keeps the mark, retries later
        extractor.extract(messages, [])
    with pytest.raises(CircuitOpenError):  # the pipeline and the worker use the fallback
        summarizer.summarize([{"role": "user", "content": "hi there"}])
    synopsis, took = timed(lambda: generator.generate("ana", profile))
    assert synopsis.source == "offline" and took < READ_LIMIT
    assert len(fake_server.requests) == asked  # none of them asked the model

    fake_server.outage_status = None
    clock.advance(30)
    assert [c.text for c in extractor.extract(messages, [])] == ["Ana lives in Lisbon."]
    assert summarizer.summarize([{"role": "user", "content": "hi"}]) == "MODEL SUMMARY"
    assert generator.generate("ana", profile).source == "llm"
    assert summarizer.breaker.state == "closed"


def test_a_memory_with_its_chat_model_down_loses_nothing_and_uses_it_once_back(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    """Session summaries, facts and the synopsis of a Memory share its chat model's
    breaker: while the model answers 500 every context is read at once, the messages
    are all indexed and summarized (offline), facts wait; once it is back they are read
    by the model."""
    clock = ManualClock()
    fake_server.chat_reply = chat
    fake_server.outage_status = 500
    model = model_at(fake_server, clock, max_retries=0)
    config = {
        "memory": {
            "buffer": {"size": 4, "summary_batch": 2, "summarizer": "llm"},
            "facts": {"enabled": True, "batch": 2, "extractor": "llm", "retry_backoff": 0.01},
        }
    }
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32), llm=model) as m:
        reads = []
        for i in range(12):
            m.add("user", f"I live in Lisbon and on day {i} I planned a trip", "ana", "s")
            _, took = timed(lambda: m.get_context("where do I live", "ana", "s"))
            reads.append(took)
        assert m.flush(30)
        assert max(reads) < 1.0  # first reads embed a local model's queries: loose bound
        _, took = timed(lambda: m.get_context("where do I live", "ana", "s"))
        assert took < READ_LIMIT
        assert m.work_stats("ana").pending == 0 and m.work_stats("ana").failed == 0
        summary = m.session_summary("ana", "s") or ""
        assert "day 0" in summary  # folded by the offline summarizer, nothing lost
        assert m.facts("ana") == []
        mark = m.store.batch([FactMarkOp("ana", "s")])[0]
        assert mark.upto == 0 and mark.attempts >= 1  # the batch waits for its retry
        assert model.breaker.failed >= 2  # type: ignore[attr-defined]  # summaries and facts

        fake_server.outage_status = None
        clock.advance(30)
        m.extract_facts("ana", "s")
        assert [f.content for f in m.facts("ana")] == ["Ana lives in Lisbon."]
        assert model.breaker.state == "closed"  # type: ignore[attr-defined]
        assert m.generate_synopsis("ana").source == "llm"


def test_a_context_never_waits_on_the_synopsis_model(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    """The synopsis of a context is read, never generated in the read: with the chat model
    answering 500 and then hanging, every context is read at once and none asks the model
    while its breaker is open; nothing is lost; once it answers, its synopsis is used."""
    clock = ManualClock()
    fake_server.chat_reply = chat
    fake_server.outage_status = 500
    model = model_at(fake_server, clock, max_retries=0)
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32), llm=model) as m:
        reads, asked = [], []
        for i in range(6):  # each fact makes the synopsis stale: a miss, every read
            m.remember(f"Ana lives in Lisbon, fact {i}", "ana")
            m.add("user", f"on day {i} I planned a trip", "ana", "s")
            context, took = timed(lambda: m.get_context("where do I live", "ana", "s"))
            reads.append(took)
            assert "fact" in context.text()  # the offline synopsis, or the store's hits
            if i < 3:  # the model is tried (in the background) until its breaker opens
                until(lambda n=i + 1: model.breaker.failed == n)  # type: ignore[attr-defined]
            asked.append(len(fake_server.requests))
        assert max(reads) < 1.0, reads  # loose: no read waited on the model
        assert asked == [1, 2, 3, 3, 3, 3]  # then no request while the breaker rests
        assert model.breaker.state == "open"  # type: ignore[attr-defined]

        fake_server.outage_status = None
        fake_server.pause(after=3)  # the model hangs now
        clock.advance(30)  # the cool-down ends: the next miss sends the probe...
        m.remember("Ana works as a nurse", "ana")
        for _ in range(5):  # ...and every read meanwhile is answered at once
            context, took = timed(lambda: m.get_context("where do I live", "ana", "s"))
            assert took < 1.0 and "IDENTITY" not in context.text()
        until(lambda: len(fake_server.requests) == 4)
        fake_server.resume()
        until(lambda: model.breaker.state == "closed")  # type: ignore[attr-defined]
        until(lambda: "who lives in Lisbon" in m.get_context("where", "ana", "s").text())
        assert len(fake_server.requests) == 4
        assert m.flush(30) and m.work_stats("ana").pending == m.work_stats("ana").failed == 0
        assert len(m.list_memories("ana")) >= 13  # 7 facts and 6 messages: nothing lost


def until(check: Any, timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds (background work), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- the HTTP embedder --------------------------------------------------------------------


def test_the_http_embedder_rests_after_failures_and_a_probe_brings_it_back(
    fake_server: FakeServer,
) -> None:
    clock = ManualClock()
    embedder = OpenAIEmbedder(
        "m",
        base_url=fake_server.openai_url,
        dimensions=8,
        max_retries=0,
        cache_size=0,
        breaker=CircuitBreaker(failures=3, cooldown=30, clock=clock),
    )
    fake_server.outage_status = 503
    for i in range(3):
        with pytest.raises(ProviderServerError):
            embedder.embed([f"text {i}"])
    asked = len(fake_server.requests)
    start = time.perf_counter()
    with pytest.raises(CircuitOpenError):
        embedder.embed(["text"])
    assert time.perf_counter() - start < READ_LIMIT and len(fake_server.requests) == asked
    with pytest.raises(CircuitOpenError):
        asyncio.run(embedder.aembed(["text"]))
    fake_server.outage_status = None
    clock.advance(30)
    assert embedder.embed(["text"]).shape == (1, 8) and embedder.breaker.state == "closed"
    assert breaker_for(embedder) is embedder.breaker
    assert OpenAIEmbedder("m", base_url=fake_server.openai_url, dimensions=8).breaker.failures == 3


def http_embedder(server: FakeServer, clock: ManualClock) -> OpenAIEmbedder:
    """An HTTP embedder at the local server, its breaker on ``clock`` (3 failures, 30 s)."""
    breaker = CircuitBreaker(failures=3, cooldown=30, clock=clock)
    options: dict[str, Any] = {"dimensions": 8, "max_retries": 0, "cache_size": 0}
    return OpenAIEmbedder("m", base_url=server.openai_url, breaker=breaker, **options)


def test_a_context_with_the_embedder_down_is_found_by_keyword_and_says_so(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    """The HTTP embedder down (the port closed, then answering 503): get_context on every
    face answers from keyword search, the recent window and the summary, and says so
    (``degraded``); search raises ProviderUnavailableError, the same on every face, and
    mode='keyword' still answers; once the embedder is back, contexts use it again."""
    from liveserver import live_server
    from tiermem.client import MemoryClient
    from tiermem.server import create_app

    clock = ManualClock()
    config = {"memory": {"synopsis": {"enabled": False}}}
    with Memory(
        str(tmp_path / "m.db"), config=config, embedder=http_embedder(fake_server, clock)
    ) as m:
        m.remember("Ana is allergic to bee stings", "ana")
        for i in range(12):
            m.add("user", f"on day {i} we talked about the weather", "ana", "s")
        assert m.flush(30)
        fake_server.stop()  # connection refused
        with live_server(create_app(m)) as url, MemoryClient(url) as client:
            contexts = [
                m.get_context("bee stings", "ana", "s"),
                asyncio.run(m.aget_context("bee stings", "ana", "s")),
                client.get_context("bee stings", "ana", "s"),
            ]
            fake_server.start()
            fake_server.outage_status = 503
            contexts.append(m.get_context("bee stings", "ana", "s"))  # the breaker rests
            for context in contexts:
                (note,) = context.degraded
                assert note.startswith("embedder: ") and "found by keyword only" in note
                assert "allergic to bee stings" in context.text()  # by keyword
                assert "day 11" in context.text()  # the recent window
                assert "degraded: embedder" in context.explain()
            for face in (m, client):
                with pytest.raises(ProviderUnavailableError):
                    face.search("bee stings", "ana")
                hits = face.search("bee stings", "ana", mode="keyword")
                assert hits[0].record.content == "Ana is allergic to bee stings"
            asked = len(fake_server.requests)
            assert m.get_context("bee stings", "ana", "s").degraded  # no request: at once
            assert len(fake_server.requests) == asked

            fake_server.outage_status = None
            clock.advance(30)
            assert m.get_context("bee stings", "ana", "s").degraded == []
            assert client.get_context("bee stings", "ana", "s").degraded == []
            assert m.search("bee stings", "ana")[0].record.content.startswith("Ana is")


def test_a_native_async_context_with_the_embedder_down(
    pg_url: str,  # noqa: F811
    fake_server: FakeServer,
) -> None:
    """PostgreSQL's native async context (the reads, keyword and vector searches in one
    round trip) answers from keyword search when the embedder is down, and says so."""
    clock = ManualClock()
    user = f"u-{uuid.uuid4()}"
    persistent = {"provider": "postgresql", "connection_string": pg_url, "native_async": True}
    config = {"memory": {"persistent": persistent, "synopsis": {"enabled": False}}}
    with Memory(config=config, embedder=http_embedder(fake_server, clock)) as m:
        m.remember("Ana is allergic to bee stings", user)
        assert m.native_async
        assert m.flush(30)
        fake_server.stop()
        for _ in range(4):  # refused, then the breaker rests: degraded either way
            context = asyncio.run(m.aget_context("bee stings", user))
            assert context.degraded and "allergic to bee stings" in context.text()
        fake_server.start()
        clock.advance(30)
        assert asyncio.run(m.aget_context("bee stings", user)).degraded == []


def test_an_offline_summarizer_needs_no_breaker() -> None:
    summary = ExtractiveSummarizer().summarize([{"role": "user", "content": "I live in Lisbon."}])
    assert "Lisbon" in summary
