"""The store worker: it indexes the line it claimed, and embeds each distinct line once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embedders import HashEmbedder
from tiermem.messages import Message
from tiermem.stores.sqlite import SQLiteStore
from tiermem.worker import StoreWorker

DIM = 32


class SentTexts(HashEmbedder):
    """Records every text the worker sends (before any deduplication of the embedder)."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.sent: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.sent += texts
        return super().embed(texts)


def test_identical_lines_are_hashed_and_embedded_once(tmp_path: Path) -> None:
    embedder = SentTexts()
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        for user in ("ana", "bo"):
            said = ["ok", "the tide was low", "ok", "we walked to the lighthouse"]
            store.append(user, "s", [Message("user", text) for text in said])
        worker = StoreWorker(store, embedder, background=False)
        assert worker.run_once() == 8
        assert sorted(embedder.sent) == [
            "user: ok",
            "user: the tide was low",
            "user: we walked to the lighthouse",
        ]
        for user in ("ana", "bo"):  # each user's lines indexed once, with their own links
            rows = store.list(user, limit=10)
            assert sorted(r.content for r in rows) == sorted(set(embedder.sent))
            assert all(r.memory_type == "message" and r.session_id == "s" for r in rows)
            assert store.work_stats(user).done == 4


def test_end_session_waits_for_another_process_folding_the_session(tmp_path: Path) -> None:
    """Another worker holds the session's summary lease (it is folding it): end_session
    waits for the lease instead of returning no summary (it did, under load)."""
    from tiermem.memory import Memory

    config = {"memory": {"worker": {"background": False}}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as memory:
        for day in range(6):
            memory.add("user", f"On day {day} I planted tomato seedlings.", "u", "s")
        assert memory.store.summary_due("another-process", "u", "s", 0, 1, 1.0) is not None
        summary = memory.end_session("u", "s")
        assert summary is not None and "tomato" in summary
