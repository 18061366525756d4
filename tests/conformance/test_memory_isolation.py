"""Property: through the Memory facade, no call for one user ever returns, counts or
deletes anything of another, on SQLite and on PostgreSQL.

Every content carries its owner's marker (a token unique to the user); a model of what
each user said and remembered is replayed beside the real Memory. After every step,
nothing returned to a user may carry another user's marker, and after a flush every
user's store count must match the model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedders import HashEmbedder
from tiermem.memory import Memory
from tiermem.stores.protocol import MemoryStore

from .conftest import DIM

USERS = 3
CONFIG = {"memory": {"buffer": {"size": 4, "summary_batch": 2}}}
ACTIONS = [
    "add",
    "add_messages",
    "remember",
    "search",
    "get_context",
    "forget",
    "forget_user",
    "synopsis",
    "count",
]
steps = st.lists(
    st.tuples(
        st.sampled_from(ACTIONS),
        st.integers(0, USERS - 1),  # acting user
        st.integers(0, USERS - 1),  # whose memory the op names (may be another's)
        st.sampled_from(["apple", "banana", "cherry"]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=20,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=steps)
def test_memory_operations_never_cross_users(
    store: MemoryStore,
    new_user: Callable[[], str],
    ops: list[tuple[str, int, int, str, int]],
) -> None:
    users = [new_user().replace("-", "") for _ in range(USERS)]  # the id is the marker
    stored: dict[str, set[str]] = {u: set() for u in users}  # contents in the store
    facts: dict[str, dict[str, str]] = {u: {} for u in users}  # id -> content
    memory = Memory(store=store, embedder=HashEmbedder(DIM), config=CONFIG)

    def clean(owner: str, texts: list[str]) -> None:
        for text in texts:
            for other in users:
                assert other == owner or other not in text, (owner, other, text)

    try:
        for action, actor_i, target_i, word, seed in ops:
            actor, target = users[actor_i], users[target_i]
            session = f"s{seed % 2}"
            if action == "add":
                content = f"{actor} says {word} {seed}"
                memory.add("user", content, actor, session)
                stored[actor].add(f"user: {content}")
            elif action == "add_messages":
                pair = [f"{actor} asks about {word} {seed}", f"{actor} hears about {word}"]
                memory.add_messages(
                    [
                        {"role": "user", "content": pair[0]},
                        {"role": "assistant", "content": pair[1]},
                    ],
                    actor,
                    session,
                )
                stored[actor].update({f"user: {pair[0]}", f"assistant: {pair[1]}"})
            elif action == "remember":
                content = f"{actor} likes {word} number {seed}"
                facts[actor][memory.remember(content, actor, "fact", 0.7)] = content
                stored[actor].add(content)
            elif action == "search":
                hits = memory.search(f"{target} {word}", actor, k=50)
                assert all(h.record.user_id == actor for h in hits)
                clean(actor, [h.record.content for h in hits])
            elif action == "get_context":
                query = f"what did {target} say about {word}?"  # names another user on purpose
                ctx = memory.get_context(query, actor, session, max_tokens=400 + seed * 20)
                clean(actor, [i.content for i in ctx.items] + [ctx.text()])
            elif action == "forget":
                known = list(facts[target])
                memory_id = known[seed % len(known)] if known else str(uuid.uuid4())
                deleted = memory.forget(memory_id, actor)
                assert deleted == (actor == target and bool(known))
                if deleted:
                    stored[actor].discard(facts[actor].pop(memory_id))
            elif action == "forget_user":
                # queued messages are dropped unwritten: at most the user's own are deleted
                assert 0 <= memory.forget_user(actor) <= len(stored[actor])
                assert memory.store.index.count(actor) == 0
                stored[actor].clear()
                facts[actor].clear()
            elif action == "synopsis":
                clean(actor, [memory.synopsis(actor).render()])
            elif action == "count":
                assert memory.flush(10)
                for u in users:
                    assert memory.store.index.count(u) == len(stored[u])
        assert memory.flush(10)
        for u in users:
            assert {r.content for r in memory.store.index.list(u, limit=500)} == stored[u]
            hits = memory.search("says asks hears likes", u, k=100, mode="vector")
            assert len(hits) == len(stored[u])
    finally:
        memory.close()
        for u in users:
            store.index.delete_user(u)
