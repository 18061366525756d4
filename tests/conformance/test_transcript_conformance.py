"""The transcript, work claims and session summaries: one suite on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pytest

from tiermem.clock import ManualClock
from tiermem.errors import ContentTooLargeError, InputError, InvalidSizeError, MissingUserError
from tiermem.messages import Message
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.queue import (
    ClaimOp,
    CompleteOp,
    FailOp,
    ReleaseOp,
    SaveSummaryOp,
    SummaryDueOp,
    WorkItem,
)
from tiermem.stores.validate import MAX_MESSAGE_CHARS, append_op

from .conftest import DIM

Users = Callable[[], str]


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def claim_mine(store: MemoryStore, owner: str, user_id: str, lease: float = 30.0) -> list[WorkItem]:
    """The user's claimable rows. Other tests' rows in a shared database are handed back
    untouched at the end (held meanwhile, so each is claimed once here)."""
    mine: list[WorkItem] = []
    others: list[WorkItem] = []
    while True:
        items = store.batch([ClaimOp(owner, 500, lease)])[0]
        if not items:
            break
        mine += [i for i in items if i.user_id == user_id]
        others += [i for i in items if i.user_id != user_id]
    for i in others:
        store.batch([FailOp(owner, i.user_id, i.seq, "not mine", 0.0, 1000)])
    return mine


def complete(store: MemoryStore, owner: str, items: list[WorkItem], seed: int) -> int:
    """Index claimed rows as a worker does (all with the vector ``unit(seed)``)."""
    done = 0
    for user in {i.user_id for i in items}:
        rows = tuple((i.seq, i.index_row(unit(seed)), ()) for i in items if i.user_id == user)
        done += store.batch([CompleteOp(owner, user, rows)])[0]
    return done


def test_append_keeps_every_message_whole_and_in_order(store: MemoryStore, new_user: Users) -> None:
    u = new_user()
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    sent = [
        Message("user", "What is the weather in Porto?", name="Ana", timestamp=when),
        Message("assistant", None, tool_calls=[call], metadata={"k": [1, {"x": None}]}),
        Message("tool", "sunny, 24 C", tool_call_id="c1", name="weather"),
        Message("assistant", [{"type": "text", "text": "Sunny."}]),
    ]
    assert store.transcript.append(u, "s", sent, agent_id="planner") == 4
    assert store.transcript.recent(u, "s", 10) == sent  # lossless: every field, the same order
    assert store.transcript.recent(u, "s", 2) == sent[2:]
    rows = store.transcript.rows(u)
    assert [r.message for r in rows] == sent and [r.state for r in rows][1] == "done"
    assert (
        store.transcript.recent(u, "other", 10) == [] and store.transcript.recent(u, None, 10) == []
    )


def test_appends_in_one_batch_count_each_and_link_in_order(
    store: MemoryStore, new_user: Users
) -> None:
    """Several appends in one transaction (a server's group commit) are sent together on
    an engine with round trips; each still counts its own rows and links to the one before."""
    u, v = new_user(), new_user()
    first = [Message("user", "one"), Message("assistant", "two")]
    second = [Message("user", "three")]
    other = [Message("user", "elsewhere")]
    ops = [append_op(u, "s", first), append_op(v, "s", other), append_op(u, "s", second)]
    assert store.batch(ops) == [2, 1, 1]
    assert store.batch([ops[0], append_op(u, "s", [Message("user", "four")])]) == [0, 1]
    assert [m.text for m in store.transcript.recent(u, "s", 10)] == ["one", "two", "three", "four"]
    links = [(r.message.text, r.previous_id) for r in store.transcript.rows(u)]
    ids = [m.message_id for m in first + second]
    assert links[:3] == [("one", None), ("two", ids[0]), ("three", ids[1])]
    assert [m.text for m in store.transcript.recent(v, "s", 10)] == ["elsewhere"]


def test_repeated_lines_stay_in_the_transcript_and_share_one_index_row(
    store: MemoryStore, new_user: Users
) -> None:
    u = new_user()
    store.transcript.append(u, "day1", [Message("user", "Yes, let's do it.")])
    store.transcript.append(u, "day2", [Message("user", "Yes, let's do it.")])
    assert [len(store.transcript.recent(u, s, 10)) for s in ("day1", "day2")] == [1, 1]
    assert complete(store, "w", claim_mine(store, "w", u), 1) == 2
    assert store.index.count(u) == 1 and len(store.transcript.rows(u)) == 2
    rows = store.transcript.rows(u)
    assert rows[0].memory_id == rows[1].memory_id == str(store.index.list(u)[0].id)
    again = Message("user", "once")
    assert store.transcript.append(u, "s", [again, again]) == 1  # the same message id is added once
    assert store.transcript.append(u, "s", [again]) == 0
    assert [m.text for m in store.transcript.recent(u, "s", 10)] == ["once"]


def test_each_message_links_to_the_one_before_across_calls(
    store: MemoryStore, new_user: Users
) -> None:
    u = new_user()
    a, b, c = (Message("user", f"line {i}") for i in range(3))
    store.transcript.append(u, "s", [a])
    store.transcript.append(u, "s", [b, c])
    complete(store, "w", claim_mine(store, "w", u), 1)
    by_id = {r.metadata["message_id"]: r.metadata.get("previous_id") for r in store.index.list(u)}
    assert by_id == {a.message_id: None, b.message_id: a.message_id, c.message_id: b.message_id}


def test_unindexed_until_completed_then_found_by_keyword_and_vector(
    store: MemoryStore, new_user: Users
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", "the lighthouse keeper")])
    (waiting,) = store.transcript.unindexed(u)
    assert waiting.message.text == "the lighthouse keeper" and waiting.state == "pending"
    assert store.index.search(u, "lighthouse", mode="keyword") == [] and store.index.count(u) == 0
    (item,) = claim_mine(store, "worker-a", u)
    assert item.attempts == 1 and item.message.text == "the lighthouse keeper"
    assert complete(store, "worker-a", [item], 1) == 1
    assert store.transcript.unindexed(u) == []
    (hit,) = store.index.search(u, "lighthouse", mode="keyword")
    (found,) = store.index.search(u, vector=unit(1), mode="vector")
    assert found.record.id == hit.record.id and found.score == pytest.approx(1.0, abs=1e-5)
    assert hit.record.memory_type == "message" and hit.record.session_id == "s"
    assert store.transcript.rows(u)[0].memory_id == str(hit.record.id)
    assert store.queue.work_stats(u).done == 1


def test_a_claimed_row_is_not_claimed_twice_until_its_lease_expires(
    store: MemoryStore, new_user: Users, clock: ManualClock
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", f"row {i}") for i in range(3)])
    mine = claim_mine(store, "a", u, lease=60)
    assert len(mine) == 3
    assert claim_mine(store, "b", u) == []  # leased to a
    clock.advance(59.9)
    assert claim_mine(store, "b", u) == []  # still a's
    clock.advance(0.2)  # a died: its lease expires
    taken = claim_mine(store, "b", u)
    assert sorted(i.seq for i in taken) == sorted(i.seq for i in mine)
    assert all(i.attempts == 2 for i in taken)
    assert complete(store, "a", mine, 2) == 0  # a lost its lease: writes nothing
    assert store.index.count(u) == 0
    assert complete(store, "b", taken, 3) == 3
    assert complete(store, "b", taken, 3) == 0  # idempotent
    vectors = [r.embedding for r in store.index.list(u)]
    assert len(vectors) == 3 and all(np.allclose(v, unit(3), atol=1e-6) for v in vectors)


def test_a_failing_row_is_retried_then_failed_with_its_reason(
    store: MemoryStore, new_user: Users
) -> None:
    u, other = new_user(), new_user()
    store.transcript.append(u, "s", [Message("user", "poison"), Message("user", "fine")])
    store.transcript.append(other, "s", [Message("user", "someone else")])
    for attempt in range(1, 4):
        items = claim_mine(store, "w", u)
        poison = next(i for i in items if i.message.text == "poison")
        assert poison.attempts == attempt
        store.batch([FailOp("w", u, poison.seq, "ValueError: too long", 0.0, 3)])
        complete(store, "w", [i for i in items if i is not poison], 4)
    assert claim_mine(store, "w", u) == []
    (failed,) = store.transcript.failed(u)
    assert failed.message.text == "poison" and failed.error == "ValueError: too long"
    assert store.queue.work_stats(u).failed == 1 and store.queue.work_stats(other).failed == 0
    assert [r.message.text for r in store.transcript.unindexed(u)] == ["poison"]  # still findable
    assert store.transcript.failed(other) == [] and store.queue.retry_failed(other) == 0
    assert store.queue.retry_failed(u) == 1
    (again,) = claim_mine(store, "w", u)
    assert again.attempts == 1 and store.queue.work_stats(u).pending == 1
    store.index.delete_user(
        u
    )  # a shared database: no row leased for 30 s to hold up others' flush()


def test_a_row_waits_for_its_backoff(store: MemoryStore, new_user: Users) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", "later")])
    (item,) = claim_mine(store, "w", u)
    store.batch([FailOp("w", u, item.seq, "busy", 30.0, 3)])
    assert claim_mine(store, "w", u) == []  # not before 30 s
    assert store.queue.work_stats(u).pending == 1
    store.index.delete_user(u)  # a shared database: no row waiting 30 s for other tests' flush()


def test_rows_given_back_for_an_outage_keep_their_attempts(
    store: MemoryStore, new_user: Users, clock: ManualClock
) -> None:
    """ReleaseOp (the embedder is down): only the holder gives rows back, uncounted, due
    after ``retry_in``; they never turn failed however often it happens."""
    u = new_user()
    store.transcript.append(u, "s", [Message("user", "a"), Message("user", "b")])
    for _ in range(5):  # more outages than any max_attempts below
        items = claim_mine(store, "w", u)
        assert [i.attempts for i in items] == [1, 1]
        seqs = tuple(i.seq for i in items)
        assert store.batch([ReleaseOp("thief", u, seqs, 0.0)])[0] == 0  # not its rows
        assert store.batch([ReleaseOp("w", u, seqs, 0.0)])[0] == 2
    items = claim_mine(store, "w", u)
    store.batch([ReleaseOp("w", u, tuple(i.seq for i in items), 30.0)])
    assert claim_mine(store, "w", u) == []  # not before 30 s
    assert store.queue.work_stats(u).pending == 2 and store.queue.work_stats(u).failed == 0
    clock.advance(30.1)
    assert [i.attempts for i in claim_mine(store, "w", u)] == [1, 1]  # due: the outage is over
    store.index.delete_user(
        u
    )  # a shared database: no row leased for 30 s to hold up others' flush()


def test_a_stopping_worker_finds_what_it_holds_and_the_queue_reports_it(
    store: MemoryStore, new_user: Users
) -> None:
    """HeldOp names the rows one owner holds (what `tiermem worker` gives back on SIGTERM);
    QueueStatsOp counts pending, claimed and failed rows and the oldest pending one."""
    u = new_user()
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(3)])
    stats = store.queue.queue_stats()
    assert stats.pending >= 3 and stats.oldest_pending is not None
    assert stats.oldest_pending <= store.clock.time()
    items = claim_mine(store, "stopping", u)
    assert store.queue.held("stopping") == {u: [i.seq for i in items]}
    assert store.queue.held("another") == {}
    assert store.queue.queue_stats().claimed >= 3
    assert store.queue.release("stopping", store.queue.held("stopping"), 0.0) == 3
    assert store.queue.held("stopping") == {}
    again = claim_mine(store, "next", u)  # free at once, not after the lease
    assert [i.attempts for i in again] == [1, 1, 1]
    complete(store, "next", again, 1)
    assert store.queue.work_stats(u).pending == 0
    store.index.delete_user(u)


def test_summaries_are_made_once_and_cover_a_range(store: MemoryStore, new_user: Users) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(10)])
    assert store.batch([SummaryDueOp("a", u, "s", 8, 4, 30.0)])[0] is None  # 2 left the window
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(10, 12)])
    summary, rows = store.batch([SummaryDueOp("a", u, "s", 8, 4, 30.0)])[0]
    assert summary.text is None and [r.message.text for r in rows] == ["m0", "m1", "m2", "m3"]
    assert store.batch([SummaryDueOp("b", u, "s", 8, 4, 30.0)])[0] is None  # a holds it
    assert store.batch([SaveSummaryOp("b", u, "s", "stolen", 0, rows[-1].seq)])[0] is False
    assert store.batch([SaveSummaryOp("a", u, "s", "m0-m3", 0, rows[-1].seq)])[0] is True
    assert (
        store.transcript.summary(u, "s").text == "m0-m3"
        and store.transcript.summary(u, "s").upto == rows[-1].seq
    )
    assert store.transcript.summary(u, "other").text is None
    everything = store.batch([SummaryDueOp("b", u, "s", 0, 1, 30.0)])[0]
    assert [r.message.text for r in everything[1]] == [f"m{i}" for i in range(4, 12)]


def test_a_holder_renews_its_leases_and_nobody_else_can(
    store: MemoryStore, new_user: Users, clock: ManualClock
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(6)])
    mine = claim_mine(store, "a", u, lease=60)
    rows = [(u, i.seq) for i in mine]
    assert store.batch([SummaryDueOp("a", u, "s", 2, 1, 60.0)])[0] is not None
    clock.advance(50)
    assert store.queue.renew("thief", 60, rows, [(u, "s")]) == 0  # not its leases
    assert store.queue.renew("a", 60, rows, [(u, "s")]) == 7  # six rows and the summary
    clock.advance(50)  # past the first lease, within the renewed one
    assert claim_mine(store, "b", u) == []
    assert store.batch([SummaryDueOp("b", u, "s", 2, 1, 60.0)])[0] is None
    assert complete(store, "a", mine, 1) == 6  # a kept its work
    assert store.queue.renew("a", 60, rows) == 0  # done rows hold no lease
    clock.advance(11)
    assert store.batch([SummaryDueOp("b", u, "s", 2, 1, 60.0)])[0] is not None  # a let it go


def test_a_summary_lease_expires_on_the_stores_clock(
    store: MemoryStore, new_user: Users, clock: ManualClock
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(6)])
    assert store.batch([SummaryDueOp("a", u, "s", 2, 1, 30.0)])[0] is not None
    clock.advance(29.9)
    assert store.batch([SummaryDueOp("b", u, "s", 2, 1, 30.0)])[0] is None  # a holds it
    clock.advance(0.2)  # a died folding it
    _, rows = store.batch([SummaryDueOp("b", u, "s", 2, 1, 30.0)])[0]
    assert store.batch([SaveSummaryOp("a", u, "s", "late", 0, rows[-1].seq)])[0] is False
    assert store.batch([SaveSummaryOp("b", u, "s", "m0-m3", 0, rows[-1].seq)])[0] is True


def test_erasure_takes_transcript_summaries_and_index_together(
    store: MemoryStore, new_user: Users
) -> None:
    u, other = new_user(), new_user()
    store.transcript.append(u, "s", [Message("user", f"m{i}") for i in range(12)])
    store.transcript.append(other, "s", [Message("user", "kept")])
    _, rows = store.batch([SummaryDueOp("a", u, "s", 2, 1, 30.0)])[0]
    store.batch([SaveSummaryOp("a", u, "s", "gone", 0, rows[-1].seq)])
    complete(store, "w", claim_mine(store, "w", u)[:6], 6)  # half indexed, half pending
    assert store.index.delete_user(u) == 12  # 6 index rows and 6 messages not indexed yet
    assert store.transcript.recent(u, "s", 50) == [] and store.transcript.rows(u) == []
    assert store.transcript.summary(u, "s").text is None and store.transcript.sessions(u) == []
    assert store.queue.work_stats(u).pending == 0 and claim_mine(store, "w", u) == []
    assert [m.text for m in store.transcript.recent(other, "s", 5)] == ["kept"]


def test_forgetting_a_message_memory_takes_its_transcript_rows(
    store: MemoryStore, new_user: Users
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("user", "forget me")])
    store.transcript.append(u, "s2", [Message("user", "forget me"), Message("user", "keep me")])
    complete(store, "w", claim_mine(store, "w", u), 5)
    (memory_id,) = [r.id for r in store.index.list(u) if r.content == "user: forget me"]
    assert store.index.delete(u, memory_id) is True
    assert [m.text for m in store.transcript.recent(u, "s2", 5)] == ["keep me"]
    assert store.transcript.recent(u, "s", 5) == []


def complete_with_passages(
    store: MemoryStore, owner: str, item: WorkItem, spans: list[tuple[int, int]]
) -> int:
    """Index one claimed long message with passages ``spans`` (vectors unit(10 + part))."""
    passages = item.derived_rows([(span, unit(10 + n)) for n, span in enumerate(spans)])
    row = (item.seq, item.index_row(unit(1), len(spans)), passages)
    return int(store.batch([CompleteOp(owner, item.user_id, (row,))])[0])


LONG = "The harbour opens at dawn. " * 20 + "The lighthouse keeper is Ana. " * 20


def test_a_long_messages_passages_are_indexed_with_it_and_found_alone(
    store: MemoryStore, new_user: Users
) -> None:
    u = new_user()
    store.transcript.append(u, "s", [Message("assistant", LONG, message_id="long-1")])
    (item,) = claim_mine(store, "w", u)
    half = LONG.index("The lighthouse")
    assert complete_with_passages(store, "w", item, [(0, half - 1), (half, len(LONG) - 1)]) == 1
    by_type = {r.memory_type: r for r in store.index.list(u)}
    whole, passage = (
        by_type["message"],
        store.index.search(u, vector=unit(11), mode="vector")[0].record,
    )
    assert whole.metadata["passages"] == 2 and passage.memory_type == "passage"
    assert passage.content == LONG[half : len(LONG) - 1]
    assert passage.metadata["excerpt_of"] == "long-1" and passage.metadata["parent"] == str(
        whole.id
    )
    assert (passage.metadata["part"], passage.metadata["start"]) == (1, half)
    (hit,) = store.index.search(u, "lighthouse keeper", mode="keyword", limit=1)
    assert hit.record.memory_type in {"passage", "message"}
    assert store.transcript.rows(u)[0].memory_id == str(whole.id)


@pytest.mark.parametrize("how", ["message", "memory"])
def test_forgetting_a_long_message_takes_its_passages(
    store: MemoryStore, new_user: Users, how: str
) -> None:
    u = new_user()
    store.transcript.append(
        u, "s", [Message("user", LONG, message_id="long-1"), Message("user", "short")]
    )
    items = sorted(claim_mine(store, "w", u), key=lambda i: i.seq)
    complete_with_passages(store, "w", items[0], [(0, 100), (100, 200)])
    complete(store, "w", items[1:], 3)
    whole = next(r for r in store.index.list(u) if r.metadata.get("passages"))
    if how == "message":
        assert store.transcript.forget_messages(u, ["long-1"]) == 1
    else:
        assert store.index.delete(u, whole.id) is True
    assert [r.content for r in store.index.list(u)] == ["user: short"]
    assert (
        store.index.search(u, vector=unit(10), mode="vector", limit=5)[0].record.content
        == "user: short"
    )


def test_sessions_list_the_most_recent_first(store: MemoryStore, new_user: Users) -> None:
    u = new_user()
    store.transcript.append(u, "old", [Message("user", "a"), Message("user", "b")])
    store.transcript.append(u, None, [Message("user", "c")])
    store.transcript.append(u, "new", [Message("user", "d")])
    assert [(s.session_id, s.messages) for s in store.transcript.sessions(u)] == [
        ("new", 1),
        (None, 1),
        ("old", 2),
    ]


@pytest.mark.parametrize(
    ("make", "error", "field"),
    [
        (lambda: Message("user", ""), InputError, "content"),
        (lambda: Message("user", "   "), InputError, "content"),
        (lambda: Message("user", "a\x00b"), InputError, "NUL"),
        (lambda: Message("user", "lone \ud800 surrogate"), InputError, "surrogate"),
        (lambda: Message("user", "x", metadata={"v": float("nan")}), InputError, "NaN"),
        (lambda: Message("user", "x", metadata={"v": float("inf")}), InputError, "message"),
        (lambda: Message("user", "x", metadata={("a", 1): 1}), InputError, "message"),
        (lambda: Message("user", "x", metadata={"k": "a\x00"}), InputError, "NUL"),
        (lambda: Message("user", "x", name="n" * 300), InputError, "name"),
        (lambda: Message("user", "x", timestamp=datetime.max), InvalidSizeError, "timestamp"),
        (lambda: Message("user", "x", timestamp=datetime.min), InvalidSizeError, "timestamp"),
        (lambda: Message("user", "x" * (MAX_MESSAGE_CHARS + 1)), ContentTooLargeError, "content"),
    ],
)
def test_what_the_store_cannot_hold_is_refused_whole(
    store: MemoryStore, new_user: Users, make: Callable[[], Any], error: type, field: str
) -> None:
    u = new_user()
    with pytest.raises(error, match=field):
        store.transcript.append(u, "s", [Message("user", "fine"), make()])
    assert store.transcript.rows(u) == [] and store.index.count(u) == 0


def test_a_message_is_read_back_whole_by_its_id_and_only_by_its_user(
    store: MemoryStore, new_user: Users
) -> None:
    u, other = new_user(), new_user()
    text = "a long pasted log line\n" * 50_000  # 1.15 M characters: kept whole
    said = Message("user", text, name="Ann", metadata={"k": 1})
    store.transcript.append(u, "s", [said, Message("assistant", "ok", message_id="a/../b")])
    found = store.transcript.message(u, said.message_id)
    assert found is not None and found.to_dict() == said.to_dict()
    assert store.transcript.message(u, "a/../b") is not None
    assert store.transcript.message(other, said.message_id) is None
    assert store.transcript.message(u, "no-such-id") is None
    with pytest.raises(InputError):
        store.transcript.message(u, 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "   ", None, "x" * 256, "a\x00b", "\ud800"])
def test_bad_user_or_session_ids_are_refused(store: MemoryStore, new_user: Users, bad: Any) -> None:
    with pytest.raises(InputError):
        store.transcript.append(bad, "s", [Message("user", "x")])
    if bad is not None and bad.strip():
        with pytest.raises(InputError):
            store.transcript.append(new_user(), bad, [Message("user", "x")])
    with pytest.raises(MissingUserError if not (bad or "").strip() else InputError):
        store.transcript.recent(bad, "s", 5)
