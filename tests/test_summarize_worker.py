"""Summarization of evicted messages: batches, background worker, failures, persistence."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from embedders import wait_until
from fakeserver import FakeServer
from tiermem.buffer.memory import BufferMemory
from tiermem.clock import ManualClock
from tiermem.errors import InvalidSizeError, InvalidTypeError, SerializationError
from tiermem.llm import OpenAIModel
from tiermem.messages import Message
from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer
from tiermem.summaries.worker import SummaryPipeline, SummaryPolicy


class Recorder:
    """A summarizer that records its batches; optionally blocks or fails."""

    def __init__(self, fail: int = 0, gate: threading.Event | None = None) -> None:
        self.batches: list[list[str]] = []
        self.previous: list[str | None] = []
        self.fail = fail
        self.gate = gate

    def summarize(self, messages: Sequence[Any], previous_summary: str | None = None) -> str:
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("llm down")
        texts = [m.text for m in messages]
        if previous_summary is None:
            self.batches.append(texts)
            return "|".join(texts)
        self.previous.append(previous_summary)
        return previous_summary + "|" + "|".join(texts)

    async def asummarize(self, messages: Sequence[Any], previous_summary: str | None = None) -> str:
        return self.summarize(messages, previous_summary)


def llm(server: FakeServer) -> OpenAIModel:
    return OpenAIModel("m", base_url=server.openai_url, api_key="k", max_retries=0, timeout=5)


def fill(buffer: BufferMemory, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        buffer.add_message("user", f"m{i}")


def test_batches_become_ring_entries_and_running_summary() -> None:
    rec = Recorder()
    buffer = BufferMemory(buffer_size=5, summarizer=rec, summary_policy=SummaryPolicy(3))
    fill(buffer, 14)  # 9 evicted: three batches of 3
    assert buffer.flush(timeout=5)
    assert rec.batches == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6", "m7", "m8"]]
    assert list(buffer.summaries) == ["m0|m1|m2", "m3|m4|m5", "m6|m7|m8"]
    assert buffer.summary == "m0|m1|m2|m3|m4|m5|m6|m7|m8"
    assert rec.previous == ["m0|m1|m2", "m0|m1|m2|m3|m4|m5"]  # merged in order
    assert buffer.get_formatted_messages()[0] == {
        "role": "system",
        "content": "Previous conversation summary: m0|m1|m2|m3|m4|m5|m6|m7|m8",
    }


def test_default_batch_is_min_of_ten_and_buffer_size() -> None:
    buffer = BufferMemory(buffer_size=5, summarizer=Recorder())
    assert buffer.summarization is not None
    assert buffer.summarization.policy.batch_size == 5
    assert BufferMemory(buffer_size=50, summarizer=Recorder()).summarization.policy.batch_size == 10  # type: ignore[union-attr]


def test_partial_batch_waits_until_flush() -> None:
    buffer = BufferMemory(buffer_size=2, summarizer=Recorder(), summary_policy=SummaryPolicy(4))
    fill(buffer, 4)  # two evicted, batch of four not complete
    assert buffer.summary is None
    assert buffer.summarization is not None and buffer.summarization.pending_messages == 2
    assert buffer.flush(timeout=5)
    assert buffer.summary == "m0|m1"


def test_append_never_waits_on_a_slow_llm(fake_server: FakeServer) -> None:
    fake_server.pause()  # no answer until every append has returned
    buffer = BufferMemory(buffer_size=5, summarizer=MemorySummarizer(llm(fake_server)))
    fill(buffer, 25)
    assert len(fake_server.requests) <= 1 and fake_server.answered == 0  # queued, not awaited
    assert buffer.summary is None and buffer.pending_messages == 20  # a read never waits
    fake_server.resume()
    assert buffer.flush(timeout=10) and buffer.summary is not None
    assert len(buffer.summaries) == 4
    assert buffer.summarization is not None and buffer.summarization.stats.batches == 4
    assert buffer.summarization.stats.failures == 0
    assert len(buffer) == 5


def test_sync_mode_summarizes_inside_append(fake_server: FakeServer) -> None:
    buffer = BufferMemory(
        buffer_size=2,
        summarizer=MemorySummarizer(llm(fake_server)),
        summary_policy=SummaryPolicy(batch_size=1, mode="sync"),
    )
    fill(buffer, 3)
    assert buffer._summary is not None and buffer._summary.startswith("reply: ")
    assert len(fake_server.requests) == 1


def test_failures_keep_the_batch_pending_then_retry(fake_server: FakeServer) -> None:
    fake_server.fail_next(500)
    fake_server.pause(after=1)  # the retry is held until the failure has been checked
    policy = SummaryPolicy(batch_size=2, retry_backoff=0.01)
    buffer = BufferMemory(
        buffer_size=2, summarizer=MemorySummarizer(llm(fake_server)), summary_policy=policy
    )
    fill(buffer, 4)
    pipeline = buffer.summarization
    assert pipeline is not None
    assert wait_until(lambda: pipeline.stats.failures == 1)
    pending = pipeline.pending
    assert len(pending) == 1 and pending[0].failures == 1
    assert "HTTP 500" in (pending[0].last_error or "")
    assert [m.text for m in pending[0].messages] == ["m0", "m1"]
    assert buffer.to_dict()["pending_summaries"]["batches"][0]["failures"] == 1
    fake_server.resume()
    assert buffer.flush(timeout=5)
    assert pipeline.stats.failures == 1 and pipeline.stats.fallbacks == 0
    assert buffer.summary is not None and buffer.summary.startswith("reply: ")


def test_after_max_failures_the_extractive_fallback_takes_over(fake_server: FakeServer) -> None:
    fake_server.fail_next(500, 500, 500)
    policy = SummaryPolicy(batch_size=3, max_failures=3, retry_backoff=0.01)
    buffer = BufferMemory(
        buffer_size=1, summarizer=MemorySummarizer(llm(fake_server)), summary_policy=policy
    )
    buffer.add_message("user", "My sister Maria moved to Lisbon in March 2023.")
    buffer.add_message("user", "I love rock climbing on weekends.")
    buffer.add_message("user", "ok")
    buffer.add_message("user", "last")
    assert buffer.flush(timeout=5)
    pipeline = buffer.summarization
    assert pipeline is not None
    assert pipeline.stats.failures == 3 and pipeline.stats.fallbacks == 1
    assert len(fake_server.requests) == 3
    assert "Lisbon" in (buffer.summary or "") and "rock climbing" in (buffer.summary or "")


def test_a_crashing_summarizer_never_loses_messages() -> None:
    rec = Recorder(fail=100)
    policy = SummaryPolicy(batch_size=2, max_failures=2, retry_backoff=0.0)
    buffer = BufferMemory(buffer_size=1, summarizer=rec, summary_policy=policy)
    fill(buffer, 7)
    assert buffer.flush(timeout=5)
    assert buffer.summarization is not None
    assert buffer.summarization.stats.messages == 6 == buffer.evicted_count
    assert all(f"m{i}" in (buffer.summary or "") for i in range(6))


def test_a_retry_waits_for_the_clock_not_for_real_time() -> None:
    clock = ManualClock()
    rec = Recorder(fail=1)
    applied: list[str] = []
    policy = SummaryPolicy(batch_size=2, retry_backoff=60)
    pipeline = SummaryPipeline(rec, lambda _, s: applied.append(s), lambda: None, policy, clock)
    pipeline([Message("user", "m0"), Message("user", "m1")])
    assert clock.settle()  # failed once, waiting a minute to retry
    assert pipeline.stats.failures == 1 and applied == []
    assert not pipeline.flush(timeout=0.05)  # a minute of the clock has not passed
    clock.advance(60)
    assert pipeline.flush(timeout=5) and applied == ["m0|m1"]


def test_pending_batches_survive_a_restart() -> None:
    rec = Recorder(fail=1000)
    policy = SummaryPolicy(batch_size=2, retry_backoff=30)
    buffer = BufferMemory(buffer_size=2, summarizer=rec, summary_policy=policy)
    for i in range(7):
        buffer.add_message(
            "user", f"I visited city number {i} in 2020."
        )  # 5 evicted: two batches pending, one message in the partial batch
    assert buffer.summarization is not None
    pipeline = buffer.summarization
    assert wait_until(lambda: pipeline.stats.failures >= 1)  # it waits to retry
    buffer.summarization.close()  # end the retry wait: the process is going down
    saved = json.loads(buffer.to_json())
    assert len(saved["pending_summaries"]["batches"]) == 2
    assert len(saved["pending_summaries"]["partial"]) == 1
    restored = BufferMemory.from_dict(saved)  # no summarizer given: the extractive one
    assert restored.flush(timeout=5)
    summary = restored.summary or ""
    assert [m.text[-12:] for m in restored.messages] == ["r 5 in 2020.", "r 6 in 2020."]
    assert restored.summarization is not None
    assert restored.summarization.stats.messages == 5
    assert isinstance(restored.summarization.summarizer, ExtractiveSummarizer)
    assert all(f"city number {i} in 2020" in summary for i in range(5))


def test_restore_with_a_summarizer_keeps_order() -> None:
    rec = Recorder()
    data = {
        "buffer_size": 2,
        "summary": "old",
        "messages": [],
        "pending_summaries": {
            "batches": [{"messages": [Message("user", "a").to_dict()], "failures": 2}],
            "partial": [Message("user", "b").to_dict()],
        },
    }
    buffer = BufferMemory.from_dict(data, summarizer=rec)
    assert buffer.flush(timeout=5)
    assert buffer.summary == "old|a|b"


@pytest.mark.parametrize(
    "pending",
    [
        "nope",
        {"batches": "x"},
        {"batches": [{"messages": "x"}]},
        {"batches": [], "partial": [{"role": "wizard"}]},
    ],
)
def test_bad_pending_state_is_a_serialization_error(pending: Any) -> None:
    with pytest.raises(SerializationError, match="pending_summaries"):
        BufferMemory.from_dict({"messages": [], "pending_summaries": pending})


def test_overload_drains_the_backlog_with_the_fallback() -> None:
    gate = threading.Event()
    rec = Recorder(gate=gate)
    policy = SummaryPolicy(batch_size=1, max_pending=3)
    buffer = BufferMemory(buffer_size=1, summarizer=rec, summary_policy=policy)
    fill(buffer, 11)  # ten batches queued behind a blocked LLM
    gate.set()
    assert buffer.flush(timeout=5)
    pipeline = buffer.summarization
    assert pipeline is not None
    assert pipeline.stats.batches == 10
    assert pipeline.stats.fallbacks >= 6  # the queue was held to max_pending
    assert len(buffer.summaries) == 10


def test_clear_forgets_pending_work() -> None:
    gate = threading.Event()
    buffer = BufferMemory(
        buffer_size=1, summarizer=Recorder(gate=gate), summary_policy=SummaryPolicy(1)
    )
    fill(buffer, 6)
    buffer.clear()
    gate.set()
    assert buffer.flush(timeout=5)
    assert buffer.summarization is not None
    assert buffer.summarization.stats.batches <= 1  # at most the one in progress
    assert buffer.to_dict()["pending_summaries"] == {"batches": [], "partial": []}


def test_concurrent_appends_lose_nothing() -> None:
    rec = Recorder()
    buffer = BufferMemory(buffer_size=3, summarizer=rec, summary_policy=SummaryPolicy(4))

    def writer(k: int) -> None:
        for i in range(50):
            buffer.add_message("user", f"t{k}-{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert buffer.flush(timeout=5)
    summarized = [text for batch in rec.batches for text in batch]
    window = [m.text for m in buffer.messages]
    assert sorted(summarized + window) == sorted(f"t{k}-{i}" for k in range(4) for i in range(50))


async def test_aflush_and_async_append(fake_server: FakeServer) -> None:
    fake_server.delay = 0.1
    buffer = BufferMemory(buffer_size=2, summarizer=MemorySummarizer(llm(fake_server)))
    for i in range(6):
        await buffer.aadd_message("user", f"m{i}")
    assert await buffer.aflush(timeout=5)
    assert buffer._summary is not None and len(buffer.summaries) == 2


def test_flush_timeout_returns_false() -> None:
    gate = threading.Event()
    buffer = BufferMemory(
        buffer_size=1, summarizer=Recorder(gate=gate), summary_policy=SummaryPolicy(1)
    )
    fill(buffer, 2)
    assert buffer.flush(timeout=0.05) is False
    gate.set()
    assert buffer.flush(timeout=5) is True


def test_buffer_without_summarizer_is_unchanged() -> None:
    buffer = BufferMemory(buffer_size=2)
    fill(buffer, 5)
    assert buffer.summary is None and buffer.flush() is True
    assert buffer.to_dict()["pending_summaries"] is None


def test_standalone_pipeline() -> None:
    out: list[tuple[str, str]] = []
    pipeline = SummaryPipeline(
        ExtractiveSummarizer(), lambda e, r: out.append((e, r)), lambda: None
    )
    pipeline([Message("user", "I adopted a dog named Rex in 2021.")])
    assert pipeline.flush(timeout=5)
    assert "Rex" in out[0][0]


@pytest.mark.parametrize(
    "kw",
    [
        {"batch_size": 0},
        {"batch_size": 2.5},
        {"max_failures": 0},
        {"max_pending": True},
        {"retry_backoff": -1},
        {"mode": "later"},
    ],
)
def test_policy_validation(kw: dict[str, Any]) -> None:
    with pytest.raises(InvalidSizeError):
        SummaryPolicy(**kw)


def test_pipeline_rejects_non_summarizers() -> None:
    with pytest.raises(InvalidTypeError, match="summarizer"):
        BufferMemory(summarizer=object())
    with pytest.raises(InvalidTypeError, match="fallback"):
        SummaryPolicy(fallback=object())  # type: ignore[arg-type]
