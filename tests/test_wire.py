"""The JSON forms of contexts: the text forms of timestamps and ids, cached or not, are
what ``isoformat`` and ``str`` give, and a context survives the round trip."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from tiermem.types.context import Context, ContextItem
from tiermem.wire import context_from_json, context_to_json, id_text, time_text


def test_equal_moments_in_other_offsets_keep_their_own_text() -> None:
    utc = datetime(2026, 11, 28, 8, 0, tzinfo=timezone.utc)
    paris = utc.astimezone(timezone(timedelta(hours=1)))
    assert utc == paris  # equal moments: a cache keyed on them would mix their texts
    assert time_text(utc) == "2026-11-28T08:00:00+00:00"
    assert time_text(paris) == "2026-11-28T09:00:00+01:00"
    assert time_text(utc) == "2026-11-28T08:00:00+00:00"
    assert time_text(utc.replace(tzinfo=None)) == "2026-11-28T08:00:00"


def test_ids_print_as_str() -> None:
    memory_id = uuid.uuid4()
    assert id_text(memory_id) == str(memory_id) == id_text(memory_id)


def test_a_context_round_trips() -> None:
    moment = datetime(2026, 11, 28, 8, 0, 0, 123456, tzinfo=timezone.utc)
    item = ContextItem(
        section="retrieved",
        source="store",
        content="My sister lives in Rome.",
        score=0.9,
        tokens=7,
        timestamp=moment,
        memory_id=uuid.uuid4(),
        similarity=0.5,
        keywords=0.25,
    )
    context = Context(
        query="where?",
        messages=[{"role": "system", "content": item.content}],
        items=[item],
        total_tokens=7,
        max_tokens=100,
    )
    data = context_to_json(context)
    assert data["items"][0]["timestamp"] == moment.isoformat()
    assert data["items"][0]["memory_id"] == str(item.memory_id)
    assert context_from_json(data).items == [item]
