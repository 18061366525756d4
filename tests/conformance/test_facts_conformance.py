"""The fact operations behave the same on SQLite and PostgreSQL: leases, marks, atomic
saves, versions, erasure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import numpy as np

from tiermem.clock import ManualClock
from tiermem.messages import Message
from tiermem.stores.facts import (
    DueSessionsOp,
    FactMarkOp,
    FactsDueOp,
    FactsFailOp,
    FactVersionsOp,
    FactWrite,
    SaveFactsOp,
)
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.records import NewMemory

from .conftest import DIM

WHEN = datetime(2023, 5, 8, tzinfo=timezone.utc)


def _messages(store: MemoryStore, user: str, session: str, texts: list[str]) -> None:
    store.transcript.append(
        user, session, [Message("user", t, name="Ana", timestamp=WHEN) for t in texts]
    )


def _fact(text: str, **metadata: object) -> NewMemory:
    vector = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    meta = {"claim": text.lower(), "valid_from": WHEN.isoformat(), "valid_until": None}
    return NewMemory(text, vector, "fact", metadata={**meta, **metadata}, created_at=WHEN)


def test_a_user_is_leased_to_one_extraction(
    store: MemoryStore, new_user: Callable[[], str]
) -> None:
    user = new_user()
    _messages(store, user, "s1", ["I live in Lisbon.", "I like tea.", "Hi."])
    assert store.batch([FactsDueOp("a", user, "s1", 4, 50, 60)])[0] is None  # below batch
    assert (user, "s1") in store.batch([DueSessionsOp(3, 10_000)])[0]
    due = store.batch([FactsDueOp("a", user, "s1", 2, 2, 60)])[0]
    assert due.upto == 0 and [r.message.text for r in due.rows] == [
        "I live in Lisbon.",
        "I like tea.",
    ]
    assert store.batch([FactsDueOp("b", user, "s1", 1, 50, 60)])[0] is None  # a holds the user
    assert (user, "s1") not in store.batch([DueSessionsOp(1, 10_000)])[0]
    lost = SaveFactsOp("b", user, "s1", 0, due.rows[-1].seq, (FactWrite(_fact("Ana likes tea.")),))
    assert store.batch([lost])[0] is None  # not b's lease: nothing written
    assert store.index.count(user, memory_type="fact") == 0
    save = SaveFactsOp("a", user, "s1", 0, due.rows[-1].seq, (FactWrite(_fact("Ana likes tea.")),))
    (tea,) = store.batch([save])[0]
    assert store.batch([FactMarkOp(user, "s1")])[0].upto == due.rows[-1].seq
    again = store.batch([FactsDueOp("b", user, "s1", 1, 50, 60)])[0]  # free again: the rest
    assert [r.message.text for r in again.rows] == ["Hi."]
    stale = SaveFactsOp("b", user, "s1", 0, again.rows[-1].seq, ())
    assert store.batch([stale])[0] is None  # the mark moved on since 0
    assert store.index.get(user, tea).content == "Ana likes tea."


def test_a_user_lease_expires_on_the_stores_clock(
    store: MemoryStore, new_user: Callable[[], str], clock: ManualClock
) -> None:
    user = new_user()
    _messages(store, user, "s1", ["I live in Lisbon.", "I like tea."])
    due = store.batch([FactsDueOp("a", user, "s1", 1, 50, 120)])[0]
    assert due is not None
    clock.advance(119)
    assert store.batch([FactsDueOp("b", user, "s1", 1, 50, 120)])[0] is None  # a holds it
    clock.advance(2)  # a died mid-extraction
    taken = store.batch([FactsDueOp("b", user, "s1", 1, 50, 120)])[0]
    assert taken is not None and taken.upto == due.upto
    late = SaveFactsOp("a", user, "s1", 0, due.rows[-1].seq, (FactWrite(_fact("Ana likes tea.")),))
    assert store.batch([late])[0] is None  # a lost the lease: nothing written
    assert store.queue.renew("a", 120, fact_users=[user]) == 0  # b's now: a cannot renew it
    assert store.queue.renew("b", 120, fact_users=[user]) == 1
    clock.advance(119)
    assert store.batch([FactsDueOp("c", user, "s1", 1, 50, 120)])[0] is None  # renewed


def test_versions_and_merges(store: MemoryStore, new_user: Callable[[], str]) -> None:
    user = new_user()
    _messages(store, user, "s1", ["I live in Lisbon."])
    due = store.batch([FactsDueOp("a", user, "s1", 1, 50, 60)])[0]
    lisbon_write = FactWrite(
        _fact("Ana lives in Lisbon.", sources=["m1"]), sources=("m1",), evidence=("Ana: x",)
    )
    (lisbon,) = store.batch([SaveFactsOp("a", user, "s1", 0, due.rows[-1].seq, (lisbon_write,))])[0]
    _messages(store, user, "s1", ["I moved to Porto.", "I live in Lisbon again? no."])
    due = store.batch([FactsDueOp("a", user, "s1", 1, 50, 60)])[0]
    later = "2024-01-01T00:00:00+00:00"
    writes = (
        FactWrite(
            _fact("Ana lives in Porto.", valid_from=later, replaces=lisbon),
            replaces=lisbon,
            change="supersede",
        ),
        FactWrite(None, merge_into=lisbon, sources=("m3",), evidence=("Ana: y",)),
        FactWrite(_fact("Ana lives in Porto."), sources=("m4",)),  # the same text: merged
    )
    porto, merged, same = store.batch(
        [SaveFactsOp("a", user, "s1", due.upto, due.rows[-1].seq, writes)]
    )[0]
    assert merged == lisbon and same == porto
    old = store.index.get(user, lisbon)
    assert old.content == "Ana lives in Lisbon."
    assert old.metadata["valid_until"] == later and old.metadata["superseded_by"] == porto
    assert old.metadata["sources"] == ["m1", "m3"] and old.metadata["mentions"] == 2
    assert store.index.get(user, porto).metadata["sources"] == ["m4"]
    for start in (lisbon, porto):
        versions = store.batch([FactVersionsOp(user, start)])[0]
        assert [str(v.id) for v in versions] == [lisbon, porto]
    assert store.batch([FactVersionsOp(new_user(), porto)])[0] == []
    assert store.batch([FactVersionsOp(user, "not-a-uuid")])[0] == []


def test_a_failure_waits_and_erasure_takes_the_marks(
    store: MemoryStore, new_user: Callable[[], str]
) -> None:
    user = new_user()
    _messages(store, user, "s1", ["I live in Lisbon."])
    assert store.batch([FactsDueOp("a", user, "s1", 1, 50, 60)])[0] is not None
    assert store.batch([FactsFailOp("a", user, "s1", "ProviderError: down", 300)])[0]
    mark = store.batch([FactMarkOp(user, "s1")])[0]
    assert (mark.upto, mark.attempts, mark.error) == (0, 1, "ProviderError: down")
    assert store.batch([FactsDueOp("b", user, "s1", 1, 50, 60)])[0] is None  # waits
    assert (user, "s1") not in store.batch([DueSessionsOp(1, 10_000)])[0]
    forced = store.batch([FactsDueOp("b", user, "s1", 1, 50, 60, True)])[0]
    assert forced is not None and forced.upto == 0  # the lease was freed by the failure
    store.index.delete_user(user)
    assert store.batch([FactMarkOp(user, "s1")])[0].attempts == 0


def test_a_save_cannot_touch_another_users_fact(
    store: MemoryStore, new_user: Callable[[], str]
) -> None:
    ana, bea = new_user(), new_user()
    (theirs,) = store.index.add_many(bea, [_fact("Bea lives in Rome.")])
    _messages(store, ana, "s1", ["I live in Lisbon."])
    due = store.batch([FactsDueOp("a", ana, "s1", 1, 50, 60)])[0]
    writes = (
        FactWrite(None, merge_into=str(theirs), sources=("m1",)),
        FactWrite(_fact("Ana lives in Lisbon."), replaces=str(theirs), change="supersede"),
    )
    saved = store.batch([SaveFactsOp("a", ana, "s1", 0, due.rows[-1].seq, writes)])[0]
    assert len(saved) == 1 and saved[0] != str(theirs)
    record = store.index.get(bea, theirs)
    assert record.metadata == _fact("Bea lives in Rome.").metadata  # untouched
    assert store.batch([FactVersionsOp(ana, str(theirs))])[0] == []
