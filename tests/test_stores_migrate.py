"""Embedding migration: real MiniLM, both engines, interrupted and resumed, idempotent."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tiermem.errors import InputError
from tiermem.stores.migrate import MigrationReport, migrate_embeddings, open_store
from tiermem.stores.records import NewMemory

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MODEL = "local/all-MiniLM-L6-v2"
FACTS = [
    "Alice is allergic to peanuts",
    "Alice lives in Lisbon",
    "Alice prefers tea over coffee",
    "Alice's daughter plays the violin",
    "Alice works as a structural engineer",
    "Alice runs a marathon every spring",
    "Alice's cat is called Miso",
]


class Interrupting:
    """The real embedder, failing on its n-th call (a crash in the middle of a run)."""

    def __init__(self, inner: object, fail_on_call: int) -> None:
        self.inner, self.fail_on_call, self.calls = inner, fail_on_call, 0
        self.model_id, self.dimension = inner.model_id, inner.dimension  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise KeyboardInterrupt
        return self.inner.embed(texts)  # type: ignore[attr-defined, no-any-return]

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


@pytest.fixture(scope="module")
def embedder() -> object:
    from tiermem.embeddings import get_embedder

    return get_embedder(MODEL)


@pytest.fixture(params=["sqlite", "postgres"])
def connection(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "migrate.db")
    url: str = request.getfixturevalue("pg_url")
    for dim in (16, 384):  # a clean pair of tables per test
        with open_store(url, dim) as store:
            store.index.delete_user("alice")
            store.index.delete_user("bob")
    return url


from conformance.conftest import pg_url  # noqa: E402, F401  (the session-wide PostgreSQL)


@pytest.mark.slow
def test_migrate_interrupted_resumed_idempotent(connection: str, embedder: object) -> None:
    rng = np.random.default_rng(0)
    with open_store(connection, 16) as old:
        old.index.add_many(
            "alice",
            [NewMemory(f, importance=0.8, metadata={"i": i}) for i, f in enumerate(FACTS)],
            embeddings=rng.standard_normal((len(FACTS), 16)),
        )
        old.index.add("bob", "Bob likes jazz", embedding=rng.standard_normal(16))
        old.index.get_many("alice", [r.id for r in old.index.list("alice")][:2])
        before = {r.id: r for r in old.index.list("alice")}

    def migrate(with_embedder: object) -> MigrationReport:
        return migrate_embeddings(
            from_dim=16,
            to_dim=384,
            to_model=MODEL,
            connection_string=connection,
            batch_size=3,
            embedder=with_embedder,  # type: ignore[arg-type]
            progress=False,
        )

    with pytest.raises(KeyboardInterrupt):
        migrate(Interrupting(embedder, fail_on_call=2))
    with open_store(connection, 384) as new:
        assert (
            new.index.count("alice") + new.index.count("bob") == 3
        )  # the first batch was committed
    report = migrate(embedder)
    assert (report.source_rows, report.migrated, report.already_present) == (8, 5, 3)
    again = migrate(embedder)
    assert (again.migrated, again.already_present) == (0, 8)

    with open_store(connection, 384, embedder) as new, open_store(connection, 16) as old:  # type: ignore[arg-type]
        assert old.index.count("alice") == len(FACTS) and new.index.count("alice") == len(FACTS)
        assert new.index.count("bob") == 1
        for rec in new.index.list("alice"):
            src = before[rec.id]
            assert (
                rec.content,
                rec.metadata,
                rec.importance,
                rec.created_at,
                rec.access_count,
            ) == (src.content, src.metadata, pytest.approx(0.8), src.created_at, src.access_count)
        hit = new.index.search("alice", "What is Alice's pet's name?", limit=1)[0]
        assert hit.record.content == "Alice's cat is called Miso"


def test_migrate_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        migrate_embeddings(
            from_dim=384, to_dim=384, to_model=MODEL, connection_string=str(tmp_path / "x.db")
        )
    with pytest.raises(InputError):
        migrate_embeddings(
            from_dim=16,
            to_dim=384,
            to_model=MODEL,
            connection_string=str(tmp_path / "x.db"),
            batch_size=0,
        )
