"""Property: random interleaved operations by several users never cross users.

A model (dict of user -> {id: content}) replays each operation; after every step the
store must agree with the model for every user, and no result may name a record of
another user.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiermem.stores.protocol import MemoryStore

from .conftest import DIM

USERS = 3
ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "search", "keyword", "update", "delete", "delete_user", "get", "count"]
        ),
        st.integers(0, USERS - 1),  # acting user
        st.integers(0, USERS - 1),  # whose record the op names (may be someone else's)
        st.sampled_from(["apple", "banana", "cherry", "date", "elder"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=ops)
def test_operations_never_cross_users(
    store: MemoryStore, new_user: Callable[[], str], steps: list[tuple[str, int, int, str, int]]
) -> None:
    users = [new_user() for _ in range(USERS)]
    model: dict[str, dict[uuid.UUID, str]] = {u: {} for u in users}
    owner: dict[uuid.UUID, str] = {}
    rng = np.random.default_rng(0)

    def vec(seed: int) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)

    for action, actor_i, target_i, word, seed in steps:
        actor, target = users[actor_i], users[target_i]
        others = list(model[target])
        target_id = others[seed % len(others)] if others else uuid.uuid4()
        if action == "add":
            content = f"{word} {seed % 7}"
            mid = store.index.add(actor, content, embedding=vec(seed))
            assert owner.get(mid, actor) == actor
            owner[mid] = actor
            model[actor][mid] = content
        elif action in ("search", "keyword"):
            hits = (
                store.index.search(actor, vector=vec(seed), limit=50)
                if action == "search"
                else store.index.search(actor, word, mode="keyword", limit=50)
            )
            assert all(h.record.user_id == actor and h.record.id in model[actor] for h in hits)
            if action == "search":
                assert len(hits) == len(model[actor])
        elif action == "update":
            try:
                rec = store.index.update(actor, target_id, importance=float(rng.random()))
                assert rec.user_id == actor and target_id in model[actor]
            except KeyError:  # NotFoundError
                assert target_id not in model[actor]
        elif action == "delete":
            assert store.index.delete(actor, target_id) == (target_id in model[actor])
            model[actor].pop(target_id, None)
        elif action == "delete_user":
            assert store.index.delete_user(actor) == len(model[actor])
            model[actor].clear()
        elif action == "get":
            rec = store.index.get(actor, target_id)
            assert (rec is not None) == (target_id in model[actor])
        for user in users:
            assert store.index.count(user) == len(model[user])
        assert {r.id for r in store.index.list(users[actor_i], limit=100)} == set(model[actor])
    for user in users:
        store.index.delete_user(user)
